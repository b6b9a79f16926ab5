package main

import (
	"encoding/json"
	"fmt"
	"github.com/vigilcdn/vigil/sdk/sdktest"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIncidentFiveHundredBlackHoledSites: 500 sites whose two level-1
// origins black-hole, level 2 healthy, every setting at its default but
// the round and the probe timeout: every site fails over, through the real
// agent and direct plugin, in the round the failover rule names (level 1
// unhealthy, level 2 not); and when no vote was lost (as on an idle
// machine), level 1 is unhealthy by unhealthy_threshold rounds and a site
// whose b1 stayed up switches within unhealthy_threshold + 1. How fast
// the probes of an incident go is measured by the direct plugin's
// benchmarks, not here: on a loaded machine a round may lose votes to its
// deadline, which delays the failover by the rule, not against it.
//
// The round is 10s, so the direct source has 9s: its 1500 probes and its
// answer take about 1s idle, but with round_interval 3s a machine loaded
// beside make test (load 20-30 on 2 cores) missed the source's 2.7s in
// every round, and the host killed the plugin each time.
func TestIncidentFiveHundredBlackHoledSites(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	const sites = 500
	dead := []string{sdktest.BlackHole(t), sdktest.BlackHole(t)}
	backup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(backup.Close)

	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, `
control {
  round_interval = "10s"
  data_dir       = %q
  plugin_dir     = %q
  api { listen = "127.0.0.1:0" }
}
source "direct" { plugin = "vigil-source-direct" }
`, filepath.Join(dir, "data"), binDir)
	for i := 0; i < sites; i++ {
		fmt.Fprintf(&b, `site "s%03d" {
  hostname = "s%03d.example.com"
  health_check { timeout = "500ms" }
  origin "a1" { address = %q }
  origin "a2" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, i, i, dead[0], dead[1], backup.URL)
	}
	config := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(config, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgentProc(t, config)
	failedOver := func() int {
		resp, err := http.Get(p.api + "/v1/sites?limit=1&status=failed_over")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			Total int `json:"total"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return v.Total
	}
	// unhealthy_threshold 3: the third round fails the primaries over.
	waitFor(t, "every site to fail over", 90*time.Second, func() bool { return failedOver() == sites })
	// From the journal, per site: the round of its switch, the round its
	// last level-1 origin turned unhealthy, and b1's changes (on a loaded
	// machine b1's own probes may time out too, and the rules then wait
	// for level 2 to be not unhealthy).
	type change struct {
		round float64
		to    any
	}
	switched := map[string]float64{}
	downAt := map[string]float64{}
	b1Changes := map[string][]change{}
	for _, e := range p.events(t) {
		ev := e["event"].(map[string]any)
		site, round := e["site"].(string), e["round"].(float64)
		switch {
		case ev["kind"] == "level_switched":
			switched[site] = round
		case ev["kind"] == "origin_state" && ev["to"] == "unhealthy" && (ev["origin"] == "a1" || ev["origin"] == "a2"):
			downAt[site] = max(downAt[site], round)
		case ev["kind"] == "origin_state" && ev["origin"] == "b1":
			b1Changes[site] = append(b1Changes[site], change{round, ev["to"]})
		}
	}
	if len(switched) != sites {
		t.Fatalf("%d sites switched in the journal, want %d", len(switched), sites)
	}
	// The rule (decisions.md, failover): the first round that ends with
	// level 1 unhealthy and level 2 not unhealthy.
	b1At := func(site string, round float64) any {
		state := any("unknown")
		for _, c := range b1Changes[site] {
			if c.round <= round {
				state = c.to
			}
		}
		return state
	}
	for site, round := range switched {
		want := downAt[site]
		for _, c := range b1Changes[site] {
			if b1At(site, want) != "unhealthy" {
				break
			}
			want = max(want, c.round)
		}
		if b1At(site, want) == "unhealthy" {
			t.Errorf("site %s failed over in round %v with b1 unhealthy since round %v", site, round, want)
			continue
		}
		if round != want {
			t.Errorf("site %s failed over in round %v; want round %v: level 1 unhealthy from round %v, b1 %v", site, round, want, downAt[site], b1Changes[site])
		}
	}
	// Votes lost to a deadline: the engine cut the source, the source
	// failed the round (timed out, or down and restarting), or the plugin
	// abstained on targets it had no time for.
	log := p.logText()
	for _, lost := range []string{"ran out of time", "vote source failed this round", "abstained on some targets"} {
		if strings.Contains(log, lost) {
			last := 0.0
			for _, round := range switched {
				last = max(last, round)
			}
			t.Logf("votes were lost to a deadline during the incident (%q: a loaded machine): the last site failed over in round %v; the rounds bound is not checked", lost, last)
			return
		}
	}
	// Every vote in: the black holes' timeouts are down votes in every
	// round, so level 1 is unhealthy by unhealthy_threshold (3). b1's own
	// probes may still time out on a loaded machine (a verdict, not a lost
	// vote), and the rule then waits for b1: the bound on the switch round
	// holds for the sites whose b1 never turned unhealthy.
	for site, round := range switched {
		if downAt[site] > 3 {
			t.Errorf("site %s: level 1 unhealthy in round %v with every vote in; want by unhealthy_threshold = 3", site, downAt[site])
		}
		b1Down := false
		for _, c := range b1Changes[site] {
			b1Down = b1Down || c.to == "unhealthy"
		}
		if !b1Down && round > 3+1 {
			t.Errorf("site %s failed over in round %v with every vote in and b1 never unhealthy; want within unhealthy_threshold + 1 = 4 rounds", site, round)
		}
	}
}

// TestIncidentStallingOrigins: primaries that send their headers and then
// stall the body, or drip it a byte at a time, are down, through the real
// agent; the site fails over.
func TestIncidentStallingOrigins(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(stall.Close)
	drip := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		for {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-release:
				return
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(drip.Close)
	backup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(backup.Close)
	dir := t.TempDir()
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = "1s"
  data_dir       = %q
  plugin_dir     = %q
  api { listen = "127.0.0.1:0" }
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check { timeout = "300ms" }
  origin "stalls" { address = %q }
  origin "drips" { address = %q }
  origin "backup" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), binDir, stall.URL, drip.URL, backup.URL)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgentProc(t, config)
	waitFor(t, "the failover to the backup", 30*time.Second, func() bool { return p.site(t, "www")["level"].(float64) == 2 })
	origins := p.site(t, "www")["origins"].(map[string]any)
	for _, name := range []string{"stalls", "drips"} {
		o := origins[name].(map[string]any)
		if o["state"] != "unhealthy" || !strings.Contains(fmt.Sprint(o["reason"]), "timeout") || !strings.Contains(fmt.Sprint(o["reason"]), "body") {
			t.Errorf("origin %s: state %v, reason %v; want unhealthy by a timeout reading the body", name, o["state"], o["reason"])
		}
	}
}
