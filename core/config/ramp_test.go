package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
)

func rampHCL(block string) string {
	return `
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check {
` + block + `
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`
}

// TestRampConfig: health_check { ramp { steps, interval } } is read into
// the site's anti-flap settings, and bad steps or intervals are refused.
func TestRampConfig(t *testing.T) {
	cfg, diags := config.Parse("test.hcl", []byte(rampHCL(`ramp {
      steps    = [5, 25, 100]
      interval = "1m"
    }`)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	af := cfg.Sites[0].HealthCheck.AntiFlap
	if af == nil || af.Ramp == nil || len(af.Ramp.Steps) != 3 || af.Ramp.Steps[1] != 25 || af.Ramp.Interval != time.Minute || af.FailbackDwell != 0 {
		t.Fatalf("anti-flap %+v", af)
	}
	if cfg, _ := config.Parse("test.hcl", []byte(rampHCL(""))); cfg.Sites[0].HealthCheck.AntiFlap != nil {
		t.Fatal("no ramp, no rule: AntiFlap should be nil")
	}
	for _, tt := range []struct{ block, want string }{
		{`ramp {
      steps    = [5, 25]
      interval = "1m"
    }`, "Invalid ramp steps"},
		{`ramp {
      steps    = [100]
      interval = "1m"
    }`, "Invalid ramp steps"},
		{`ramp {
      steps    = [50, 25, 100]
      interval = "1m"
    }`, "Invalid ramp steps"},
		{`ramp {
      steps    = [0, 100]
      interval = "1m"
    }`, "Invalid ramp steps"},
		{`ramp {
      steps    = [10, 100]
      interval = "0s"
    }`, "Invalid duration for interval"},
		{`ramp {
      steps = [10, 100]
    }`, "interval"},
		{`ramp {
      steps    = [10, 100]
      interval = "1m"
    }
    ramp {
      steps    = [10, 100]
      interval = "1m"
    }`, "Duplicate ramp block"},
	} {
		_, diags := config.Parse("test.hcl", []byte(rampHCL(tt.block)))
		if !diags.HasErrors() || !strings.Contains(diags.Error(), tt.want) {
			t.Errorf("%s: diagnostics %v, want %q", tt.block, diags, tt.want)
		}
	}
}
