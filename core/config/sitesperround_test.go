package config_test

import (
	"testing"

	"github.com/vigilcdn/vigil/core/config"
)

func TestSitesPerRound(t *testing.T) {
	const sites = `
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}`
	for _, tt := range []struct {
		name, control string
		want          int
		auto          bool
		err           string // the diagnostic, file:line:col and summary
	}{
		{name: "unset", want: config.DefaultSitesPerRound},
		{name: "a number", control: `sites_per_round = 750`, want: 750},
		{name: "a number in quotes", control: `sites_per_round = "750"`, want: 750},
		{name: "auto sizes from the default", control: `sites_per_round = "auto"`, want: config.DefaultSitesPerRound, auto: true},
		{name: "another word", control: `sites_per_round = "fast"`, err: `test.hcl:3,21-27: Invalid sites_per_round; sites_per_round is a whole number of sites a round probes (at least 1), or "auto" to size each round from the time the last rounds took; got "fast".`},
		{name: "AUTO is not auto", control: `sites_per_round = "AUTO"`, err: `test.hcl:3,21-27: Invalid sites_per_round; sites_per_round is a whole number of sites a round probes (at least 1), or "auto" to size each round from the time the last rounds took; got "AUTO".`},
		{name: "zero", control: `sites_per_round = 0`, err: `test.hcl:3,21-22: Invalid sites_per_round; sites_per_round must be at least 1; got 0.`},
		{name: "a bool", control: `sites_per_round = true`, err: `test.hcl:3,21-25: Invalid sites_per_round; sites_per_round is a whole number of sites a round probes (at least 1), or "auto" to size each round from the time the last rounds took; got a bool.`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := config.Parse("test.hcl", []byte("control {\n  round_interval = \"30s\"\n  "+tt.control+"\n}\n"+sites))
			if tt.err != "" {
				if !diags.HasErrors() || len(diags) != 1 {
					t.Fatalf("diagnostics %v, want one error %q", diags, tt.err)
				}
				if got := diags[0].Subject.String() + ": " + diags[0].Summary + "; " + diags[0].Detail; got != tt.err {
					t.Fatalf("diagnostic\n got %s\nwant %s", got, tt.err)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			if c := cfg.Control; c.SitesPerRound != tt.want || c.SitesPerRoundAuto != tt.auto {
				t.Fatalf("sites_per_round %d auto %v, want %d auto %v", c.SitesPerRound, c.SitesPerRoundAuto, tt.want, tt.auto)
			}
		})
	}
}
