package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
)

// TestSwitchRamped: an operator's switch back to the top level, asked
// ramped, starts the site's ramp as an automatic failback would; a site
// without a ramp refuses it with no_ramp.
func TestSwitchRamped(t *testing.T) {
	ctx := context.Background()
	src := enginetest.Sources{"direct": enginetest.NewSource("direct")}
	e, _ := enginetest.Start(t, enginetest.Config(t, `
control { round_interval = "1s" }
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  failback = "manual"
  health_check {
    unhealthy_threshold = 1
    healthy_threshold   = 1
    ramp {
      steps    = [10, 50, 100]
      interval = "1m"
    }
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
site "plain" {
  hostname = "plain.example.com"
  origin "a1" { address = "http://127.0.0.1:18011" }
  origin "b1" {
    address = "http://127.0.0.1:18013"
    level   = 2
  }
}`), src, "")
	e.RunRound(ctx)
	src["direct"].SetDown("www", "a1", true)
	e.RunRound(ctx)
	if v := e.Views().Site("www"); v.Level != 2 {
		t.Fatalf("www on level %d after a1 failed, want 2", v.Level)
	}
	src["direct"].SetDown("www", "a1", false)
	e.RunRound(ctx) // level 1 healthy again; failback is manual: www stays
	if _, err := e.SwitchRamped(ctx, "www", 1, "alice"); err != nil {
		t.Fatal(err)
	}
	v := e.Views().Site("www")
	if v.Level != 1 || v.Ramp == nil || v.Ramp.From != 2 || v.Ramp.Weight != 10 {
		t.Fatalf("after a ramped switch: level %d, ramp %+v; want level 1 ramping from 2 at 10%%", v.Level, v.Ramp)
	}
	var pubRamp bool
	for _, s := range e.Hub().Current().Sites {
		if s.Name == "www" && s.Ramp != nil && s.Ramp.Weight == 10 && s.Ramp.From == 2 {
			pubRamp = true
		}
	}
	if !pubRamp {
		t.Errorf("the publication does not carry the ramp")
	}
	_, err := e.SwitchRamped(ctx, "plain", 2, "alice")
	var ae *engine.ActionError
	if !errors.As(err, &ae) || ae.Code != "no_ramp" {
		t.Fatalf("a ramped switch of a site without a ramp: %v, want no_ramp", err)
	}
}
