package agent

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigilcdn/vigil/core/config"
)

// TestWarnScaleOpenFileLimit: with a fake open-file limit injected, the
// agent's start warnings say when the limit caps the direct source's
// probes in flight below a round's targets (ulimit -n 256 against 1,000
// sites of two origins), and vigil_probe_concurrency_limited is 1; a
// high limit, an unknown one, or no direct source is no warning and 0.
// More sites than sites_per_round is its own warning, with the cycle.
func TestWarnScaleOpenFileLimit(t *testing.T) {
	fleet := func(plugin string, sites int) *config.Config {
		var b strings.Builder
		fmt.Fprintf(&b, "control {\n  round_interval = \"30s\"\n}\nsource \"probe\" { plugin = %q }\n", plugin)
		for i := range sites {
			fmt.Fprintf(&b, "site \"s%04d\" {\n  hostname = \"s%d.example.com\"\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" { address = \"http://127.0.0.1:2\" }\n}\n", i, i)
		}
		cfg, diags := config.Parse("test.hcl", []byte(b.String()))
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return cfg
	}
	tests := []struct {
		name    string
		cfg     *config.Config
		limit   int
		limited float64
		want    []string // in the log
		not     []string
	}{
		{"ulimit -n 256, 1000 sites", fleet("vigil-source-direct", 1000), 256, 1,
			[]string{"open-file limit caps the probes", "open_file_limit=256", "probes_in_flight=192", "targets_per_round=1000", "LimitNOFILE", "more sites than sites_per_round", "cycle=1m0s"}, nil},
		{"the packages' 65536", fleet("vigil-source-direct", 1000), 65536, 0,
			[]string{"more sites than sites_per_round"}, []string{"open-file limit"}},
		{"limit unknown", fleet("vigil-source-direct", 100), 0, 0, nil, []string{"open-file limit", "sites_per_round"}},
		{"no direct source", fleet("vigil-source-node", 100), 256, 0, nil, []string{"open-file limit"}},
		{"a small fleet fits", fleet("vigil-source-direct", 50), 256, 0, nil, []string{"open-file limit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := openFileLimit
			openFileLimit = func() int { return tt.limit }
			t.Cleanup(func() { openFileLimit = old })
			var logs bytes.Buffer
			log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
			g := newLimitedGauge(prometheus.NewRegistry())
			g.Set(-1) // warnScale must set it
			warnScale(log, tt.cfg, g)
			if got := testutil.ToFloat64(g); got != tt.limited {
				t.Errorf("vigil_probe_concurrency_limited = %v, want %v", got, tt.limited)
			}
			for _, w := range tt.want {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, logs.String())
				}
			}
			for _, w := range tt.not {
				if strings.Contains(logs.String(), w) {
					t.Errorf("log has %q:\n%s", w, logs.String())
				}
			}
		})
	}
}
