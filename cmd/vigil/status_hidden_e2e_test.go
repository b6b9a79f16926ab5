package main

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// TestEndToEndHiddenStates: the real agent, the real direct probe and
// real origins on loopback. Three sites share a primary and a backup;
// the primary fails and recovers. Then, with nothing hidden (issue 33):
// the site whose failback dwell holds says so, the manual site says its
// failback waits for an operator, and the ramped site says its step, in
// GET /v1/sites/{site} and in vigil status; the ramp's start is in the
// journal as a ramp_step event. The dwell (30 min) and the ramp's interval
// (an hour) are long, so that what the test reads cannot move on while it
// reads.
func TestEndToEndHiddenStates(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	primary := demoorigin.New("a1")
	psrv := httptest.NewServer(primary)
	t.Cleanup(psrv.Close)
	bsrv := httptest.NewServer(demoorigin.New("b1"))
	t.Cleanup(bsrv.Close)
	dir := t.TempDir()
	site := func(name, failback, health string) string {
		return fmt.Sprintf(`
site %q {
  hostname = "%s.example.com"
  %s
  health_check {
    unhealthy_threshold = 1
    healthy_threshold   = 1
    %s
  }
  origin "a1" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}`, name, name, failback, health, psrv.URL, bsrv.URL)
	}
	config := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`
control {
  round_interval = "200ms"
  data_dir       = %q
  plugin_dir     = %q
  api { listen = "127.0.0.1:0" }
}
source "direct" { plugin = "vigil-source-direct" }
`, filepath.Join(dir, "data"), binDir)+
		site("dwell", "", `failback_dwell = "30m"`)+
		site("manual", `failback = "manual"`, "")+
		site("ramp", "", `ramp {
      steps    = [25, 50, 100]
      interval = "1h"
    }`)), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := startAgentProc(t, config)
	view := func(name string) *api.SiteView {
		var v api.SiteView
		if err := siteJSON(agent.api+"/v1/sites/"+name, &v); err != nil {
			t.Fatal(err)
		}
		return &v
	}
	sites := []string{"dwell", "manual", "ramp"}
	waitFor(t, "level 1 healthy on every site", 20*time.Second, func() bool {
		for _, s := range sites {
			if v := view(s); v.Level != 1 || v.Levels["1"] != "healthy" || v.Levels["2"] != "healthy" {
				return false
			}
		}
		return true
	})
	primary.SetMode(demoorigin.Failing)
	waitFor(t, "every site on level 2", 20*time.Second, func() bool {
		for _, s := range sites {
			if view(s).Level != 2 {
				return false
			}
		}
		return true
	})
	primary.SetMode(demoorigin.Healthy)
	waitFor(t, "the ramp's failback and level 1 healthy again on the others", 20*time.Second, func() bool {
		return view("ramp").Level == 1 && view("dwell").Levels["1"] == "healthy" && view("manual").Levels["1"] == "healthy"
	})

	status := func(name string) string {
		var out, errb bytes.Buffer
		if code := runStatus([]string{"-address", agent.api, name}, &out, &errb); code != 0 {
			t.Fatalf("vigil status %s exited %d: %s", name, code, errb.String())
		}
		return out.String()
	}
	t.Run("dwell", func(t *testing.T) {
		v := view("dwell")
		if v.Level != 2 || v.Waiting == nil || v.Waiting.Why != api.WaitingDwell || v.Waiting.Level != 1 || v.Waiting.Until == nil || v.Waiting.Command != "vigil switch dwell 1" {
			t.Fatalf("GET /v1/sites/dwell: level %d, waiting %+v; want level 2 waiting out its dwell for level 1", v.Level, v.Waiting)
		}
		if out := status("dwell"); !strings.Contains(out, "failback to level 1 in ") || !strings.Contains(out, "(dwell): level 1 is healthy; vigil switch dwell 1 fails back now") {
			t.Errorf("vigil status dwell:\n%s\nwant the dwell's line", out)
		}
	})
	t.Run("manual", func(t *testing.T) {
		v := view("manual")
		if v.Level != 2 || v.Waiting == nil || v.Waiting.Why != api.WaitingManual || v.Waiting.Level != 1 {
			t.Fatalf("GET /v1/sites/manual: level %d, waiting %+v; want level 2 waiting for a manual failback", v.Level, v.Waiting)
		}
		if out := status("manual"); !strings.Contains(out, "manual failback waiting: level 1 is healthy; run vigil switch manual 1") {
			t.Errorf("vigil status manual:\n%s\nwant the waiting manual failback", out)
		}
	})
	t.Run("ramp", func(t *testing.T) {
		v := view("ramp")
		if v.Ramp == nil || v.Ramp.Weight != 25 || v.Ramp.From != 2 || v.Ramp.Step != 1 || v.Ramp.Steps != 3 || v.Waiting != nil {
			t.Fatalf("GET /v1/sites/ramp: ramp %+v, waiting %+v; want step 1/3 at 25%% from level 2", v.Ramp, v.Waiting)
		}
		if out := status("ramp"); !strings.Contains(out, "ramp step 1/3: 25% of new requests to level 1, the rest on level 2") {
			t.Errorf("vigil status ramp:\n%s\nwant the ramp's step", out)
		}
		var steps []string
		for _, line := range agent.events(t) {
			ev, _ := line["event"].(map[string]any)
			if line["site"] == "ramp" && ev["kind"] == "ramp_step" {
				steps = append(steps, fmt.Sprint(ev["level"], "/", ev["from"], "/", ev["weight"]))
			}
		}
		if got := strings.Join(steps, " "); got != "1/2/25" {
			t.Errorf("the journal's ramp_step events (level/from/weight): %q, want 1/2/25", got)
		}
	})
}
