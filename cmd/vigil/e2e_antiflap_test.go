package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// TestEndToEndFlapDamping: a primary origin made to alternate every round
// bounces the site between its levels without the flap rule; with
// flap { changes = 3, within = "20s" } it is held out (origin_flapping in
// GET /v1/events, "flapping": true in GET /v1/sites/www), the site stays
// on level 2, and the hold survives a restart.
//
// within is a wall-clock window over 200 ms rounds: 20 s is long enough
// for four changes, and for a restart and two rounds inside the hold, on a
// machine many times slower than idle; the hold's end then takes 20 s.
func TestEndToEndFlapDamping(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	t.Run("without the rule it bounces", func(t *testing.T) {
		agent, stop := flapAgent(t, "")
		waitFor(t, "the site to bounce back to level 1 at least three times", 30*time.Second, func() bool {
			return countSwitches(agent.events(t), 1) >= 3
		})
		stop()
		for _, ev := range agent.events(t) {
			if eventKind(ev) == "origin_flapping" {
				t.Fatalf("origin_flapping without a flap rule: %v", ev)
			}
		}
	})
	t.Run("with the rule it is held out", func(t *testing.T) {
		agent, stop := flapAgent(t, "    flap {\n      changes = 3\n      within  = \"20s\"\n    }\n")
		waitFor(t, "origin_flapping in GET /v1/events", 30*time.Second, func() bool {
			for _, ev := range agent.events(t) {
				if eventKind(ev) == "origin_flapping" && eventField(ev, "flapping") == true {
					return true
				}
			}
			return false
		})
		a1 := func() map[string]any { return agent.site(t, "www")["origins"].(map[string]any)["a1"].(map[string]any) }
		// The journal is in the store as soon as the commit is, and the
		// views are swapped in right after: wait for them rather than
		// read them at once.
		waitFor(t, "a1's view to show the hold", 5*time.Second, func() bool { return a1()["flapping"] == true })
		if o := a1(); o["flapping"] != true || o["flapping_since"] == nil || o["flapping_until"] == nil || o["state"] != "unhealthy" {
			t.Fatalf("GET /v1/sites/www: a1 is %v; want flapping with since and until, unhealthy", o)
		}
		// Held: the site stays on level 2 while a1 keeps alternating.
		before := countSwitches(agent.events(t), 1)
		start := agent.site(t, "www")["round"].(float64)
		waitFor(t, "ten more rounds", 20*time.Second, func() bool { return agent.site(t, "www")["round"].(float64) >= start+10 })
		if after := countSwitches(agent.events(t), 1); after != before {
			t.Fatalf("the site failed back %d times while a1 was held as flapping", after-before)
		}
		if lvl := agent.site(t, "www")["level"].(float64); lvl != 2 {
			t.Fatalf("level %v while a1 is held; want 2", lvl)
		}
		// The hold survives a restart: stop flapping, restart at once; a1
		// is still held (a lost hold would make it healthy at its first
		// up verdict, healthy_threshold being 1).
		stop()
		if err := agent.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-agent.done
		again := startAgentProc(t, agent.config)
		o := again.site(t, "www")["origins"].(map[string]any)["a1"].(map[string]any)
		if o["flapping"] != true || o["state"] != "unhealthy" {
			t.Fatalf("after a restart a1 is %v; want still held as flapping", o)
		}
		start = again.site(t, "www")["round"].(float64)
		waitFor(t, "two rounds after the restart", 20*time.Second, func() bool { return again.site(t, "www")["round"].(float64) >= start+2 })
		if o := again.site(t, "www")["origins"].(map[string]any)["a1"].(map[string]any); o["flapping"] != true || o["state"] == "healthy" {
			t.Fatalf("two rounds after the restart a1 is %v; want still held", o)
		}
		// Stable for within (20s): released, healthy, and the site fails back.
		waitFor(t, "the hold's end and the failback", 40*time.Second, func() bool {
			s := again.site(t, "www")
			return s["level"].(float64) == 1 && s["origins"].(map[string]any)["a1"].(map[string]any)["flapping"] == nil
		})
		ended := false
		for _, ev := range again.events(t) {
			ended = ended || (eventKind(ev) == "origin_flapping" && eventField(ev, "flapping") == false)
		}
		if !ended {
			t.Fatal("no origin_flapping {flapping: false} in GET /v1/events after the hold ended")
		}
	})
}

type flapProc struct {
	*agentProc
	config string
}

// flapAgent starts an agent over a site whose only level-1 origin a1
// alternates between failing and healthy at every new round (as GET
// /v1/sites/www reports them); stop ends the alternation, a1 healthy.
func flapAgent(t *testing.T, flap string) (*flapProc, func()) {
	t.Helper()
	addr := map[string]string{}
	var a1 *demoorigin.Server
	for _, n := range []string{"a1", "b1", "b2"} {
		s := demoorigin.New(n)
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		addr[n] = srv.URL
		if n == "a1" {
			a1 = s
		}
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = "200ms"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "direct" {
  plugin  = "vigil-source-direct"
  timeout = "2s"
}
site "www" {
  hostname = "www.example.com"
  health_check {
    path                = "/cdn-health"
    timeout             = "500ms"
    unhealthy_threshold = 1
    healthy_threshold   = 1
%s  }
  origin "a1" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
  origin "b2" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), binDir, flap, addr["a1"], addr["b1"], addr["b2"])
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := startAgentProc(t, config)
	waitFor(t, "level 1 to turn healthy", 20*time.Second, func() bool {
		return agent.site(t, "www")["levels"].(map[string]any)["1"] == "healthy"
	})
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		last, failing := -1.0, false
		for {
			select {
			case <-quit:
				a1.SetMode(demoorigin.Healthy)
				return
			case <-time.After(10 * time.Millisecond):
			}
			if r, ok := agent.siteRound(); ok && r != last {
				last, failing = r, !failing
				if failing {
					a1.SetMode(demoorigin.Failing)
				} else {
					a1.SetMode(demoorigin.Healthy)
				}
			}
		}
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			close(quit)
			<-done
		}
	}
	t.Cleanup(stop)
	return &flapProc{agentProc: agent, config: config}, stop
}

// siteRound is the round of www's last probe, without failing the test
// (it runs in a goroutine).
func (p *agentProc) siteRound() (float64, bool) {
	resp, err := http.Get(p.api + "/v1/sites/www")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var v map[string]any
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return 0, false
	}
	r, ok := v["round"].(float64)
	return r, ok
}

func countSwitches(events []map[string]any, to float64) int {
	n := 0
	for _, ev := range events {
		if eventKind(ev) == "level_switched" && eventField(ev, "to") == to {
			n++
		}
	}
	return n
}

// eventKind and eventField read a journal entry of GET /v1/events, its
// event either nested ("event") or inline.
func eventKind(ev map[string]any) any { return eventField(ev, "kind") }

func eventField(ev map[string]any, key string) any {
	if inner, ok := ev["event"].(map[string]any); ok {
		return inner[key]
	}
	return ev[key]
}
