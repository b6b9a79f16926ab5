package preflight_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/preflight"
)

// TestScaleAuto: with sites_per_round = "auto" the cycle is counted at
// the 500 its rounds start at (the longest it can be), and the open-file
// check counts every site's targets, since a round may grow to all.
func TestScaleAuto(t *testing.T) {
	conf := func(perRound string) *config.Config {
		var b strings.Builder
		fmt.Fprintf(&b, "control {\n  round_interval = \"30s\"\n  sites_per_round = %s\n}\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n", perRound)
		for i := range 1000 {
			fmt.Fprintf(&b, "site \"s%04d\" {\n  hostname = \"s%d.example.com\"\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" { address = \"http://127.0.0.1:2\" }\n}\n", i, i)
		}
		cfg, diags := config.Parse("test.hcl", []byte(b.String()))
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return cfg
	}
	for _, tt := range []struct {
		name     string
		perRound string
		auto     bool
		need     int // targets a round wants in flight
		warning  string
	}{
		{"a number", "500", false, 1000, "at most 500 a round (sites_per_round)"},
		{"auto", `"auto"`, true, 2000, `with sites_per_round = "auto": 500 a round at first`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := conf(tt.perRound)
			s, over := preflight.ScaleOf(cfg)
			if !over || s.Auto != tt.auto || s.PerRound != 500 || s.Rounds != 2 || s.Cycle != time.Minute {
				t.Fatalf("ScaleOf = %+v, %v; want over, auto %v, 500 a round, 2 rounds of 30s", s, over, tt.auto)
			}
			if !strings.Contains(s.Warning(), tt.warning) {
				t.Errorf("warning %q lacks %q", s.Warning(), tt.warning)
			}
			fl, capped := preflight.FileLimitOf(cfg, 1024)
			if fl.Need != tt.need || !capped {
				t.Errorf("FileLimitOf: need %d (capped %v), want %d targets, capped", fl.Need, capped, tt.need)
			}
		})
	}
}
