package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
)

func confirmHCL(control, hc string) string {
	return `
control {
  round_interval = "30s"
` + control + `
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check {
` + hc + `
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
site "api" {
  hostname = "api.example.com"
  health_check {
    unhealthy_threshold = 3
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`
}

// TestConfirmConfig: health_check { confirm_interval } and control {
// confirm_budget } are read, defaulted and checked, each bad value with a
// diagnostic at its line that says what to write instead.
func TestConfirmConfig(t *testing.T) {
	cfg, diags := config.Parse("test.hcl", []byte(confirmHCL("confirm_budget = 20", `confirm_interval = "3s"`)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if got := cfg.Site("www").HealthCheck.ConfirmInterval; got != 3*time.Second {
		t.Fatalf("www confirm_interval = %s, want 3s", got)
	}
	if got := cfg.Site("api").HealthCheck.ConfirmInterval; got != 0 {
		t.Fatalf("api has no confirm_interval, got %s", got)
	}
	if cfg.Site("www").HealthCheck == cfg.Site("api").HealthCheck {
		t.Fatal("two health checks that differ in confirm_interval share one value")
	}
	if got := cfg.Control.ConfirmSites(); got != 100 {
		t.Fatalf("confirm_budget 20 of 500 sites = %d sites, want 100", got)
	}
	def, diags := config.Parse("test.hcl", []byte(confirmHCL("", "")))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if def.Control.ConfirmBudget != config.DefaultConfirmBudget || def.Control.ConfirmSites() != 50 {
		t.Fatalf("default budget %d%% = %d sites, want %d%% = 50", def.Control.ConfirmBudget, def.Control.ConfirmSites(), config.DefaultConfirmBudget)
	}
	for _, tt := range []struct {
		name, control, hc string
		want, line        string
	}{
		{"not shorter than the round", "", `confirm_interval = "30s"`, "confirm_interval not shorter than round_interval", "test.hcl:10,20"},
		{"too short", "", `confirm_interval = "100ms"`, "confirm_interval too short", "test.hcl:10,20"},
		{"not a duration", "", `confirm_interval = "fast"`, "Invalid duration for confirm_interval", "test.hcl:10,20"},
		{"zero", "", `confirm_interval = "0s"`, "must be greater than zero", "test.hcl:10,20"},
		{"budget above 100", "confirm_budget = 150", "", "Invalid confirm_budget", "test.hcl:4,"},
		{"budget zero", "confirm_budget = 0", "", "Invalid confirm_budget", "test.hcl:4,"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := config.Parse("test.hcl", []byte(confirmHCL(tt.control, tt.hc)))
			if !diags.HasErrors() {
				t.Fatalf("accepted; want %q", tt.want)
			}
			if got := diags.Error(); !strings.Contains(got, tt.want) || !strings.Contains(got, tt.line) {
				t.Fatalf("diagnostics %q; want %q at %s", got, tt.want, tt.line)
			}
		})
	}
}

// TestConfirmConfigCached: the decoded-configuration cache keeps
// confirm_interval and confirm_budget, so a second start has them too.
func TestConfirmConfigCached(t *testing.T) {
	dir := t.TempDir()
	src := strings.Replace(confirmHCL("confirm_budget = 20\n  data_dir = \""+filepath.Join(dir, "data")+"\"", `confirm_interval = "3s"`), "control {", "control {", 1)
	path := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the first load writes the cache, the second reads it
		cfg, diags := config.LoadCached(path)
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		if got := cfg.Site("www").HealthCheck.ConfirmInterval; got != 3*time.Second {
			t.Fatalf("load %d: confirm_interval = %s, want 3s", i+1, got)
		}
		if cfg.Control.ConfirmBudget != 20 {
			t.Fatalf("load %d: confirm_budget = %d, want 20", i+1, cfg.Control.ConfirmBudget)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data", config.CacheFileName)); err != nil {
		t.Fatalf("no cache was written: %v", err)
	}
}
