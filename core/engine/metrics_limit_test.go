package engine_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/engine/enginetest"
)

// TestProbeSeriesLimit: control { metrics { probe_series_sites } } decides
// whether /metrics has the per-vote series; the per-origin ones stay.
func TestProbeSeriesLimit(t *testing.T) {
	for _, tt := range []struct {
		name, control string
		want          bool
	}{
		{"default", "", true},
		{"off", "control {\n  metrics {\n    probe_series_sites = 0\n  }\n}\n", false},
		{"above the fleet", "control {\n  metrics {\n    probe_series_sites = 1\n  }\n}\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := enginetest.Start(t, enginetest.Config(t, tt.control+`
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}`), enginetest.Sources{}, "")
			e.RunRound(context.Background())
			var b bytes.Buffer
			if err := e.Views().WriteMetrics(&b); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(b.String(), "vigil_probe_success{"); got != tt.want {
				t.Errorf("per-vote series present = %v, want %v", got, tt.want)
			}
			if !strings.Contains(b.String(), `vigil_origin_consecutive_successes{origin="a1",site="www"} 1`) {
				t.Errorf("the per-origin series are missing")
			}
		})
	}
}
