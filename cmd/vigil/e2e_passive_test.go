package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
)

// TestEndToEndPassiveVotes runs the node gateway with two real vigil-node
// agents that probe and proxy. Level 1's origins answer their health path
// with 200 but every other path with 500: the probes stay green. Real
// traffic through the nodes' proxies (a few hundred requests a second)
// fails over to level 2 by passive votes with passive_votes = true, and
// does not without it.
func TestEndToEndPassiveVotes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	t.Run("opt-in", func(t *testing.T) { runPassive(t, true) })
	t.Run("without", func(t *testing.T) { runPassive(t, false) })
}

func runPassive(t *testing.T, optIn bool) {
	var sick atomic.Bool
	sickOrigin := func() *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/cdn-health" && sick.Load() {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			_, _ = io.WriteString(w, "ok")
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	a1, a2 := sickOrigin(), sickOrigin()
	b1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "b1") }))
	t.Cleanup(b1.Close)

	dir := t.TempDir()
	gateway := testnet.Addr(t)
	passive := ""
	if optIn {
		passive = "passive_votes = true\n    passive_min_requests = 10\n    passive_failure_ratio = 0.3"
	}
	// One node probes each origin per round; with the opt-in, both nodes'
	// passive windows vote too.
	cfg := fmt.Sprintf(`
control {
  round_interval = "300ms"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 1
  timeout   = "3s"
  env       = ["VIGIL_NODE_TOKEN"]
  config {
    listen          = %q
    token_env       = "VIGIL_NODE_TOKEN"
    online_timeout  = "3s"
    nodes_per_round = 1
    %s
  }
}
site "www" {
  hostname = "www.example.com"
  health_check {
    path                = "/cdn-health"
    timeout             = "500ms"
    unhealthy_threshold = 3
    healthy_threshold   = 2
  }
  origin "a1" { address = %q }
  origin "a2" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), binDir, gateway, passive, a1.URL, a2.URL, b1.URL)
	config := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIGIL_NODE_TOKEN", "node-secret")
	agent := startAgentProc(t, config)

	var proxies []string
	for _, id := range []string{"edge-1", "edge-2"} {
		listen := testnet.Addr(t)
		proxies = append(proxies, "http://"+listen)
		cmd := exec.Command(filepath.Join(binDir, "vigil-node"), "-id", id, "-gateway", gateway, "-token-env", "VIGIL_NODE_TOKEN",
			"-control-plane", agent.api, "-control-plane-token-env", "VIGIL_TOKEN", "-proxy-listen", listen)
		cmd.Env = append(os.Environ(), "VIGIL_NODE_TOKEN=node-secret", "VIGIL_TOKEN=e2e-token")
		var log strings.Builder
		cmd.Stderr = &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("%s log:\n%s", id, log.String())
			}
		})
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(client.CloseIdleConnections)
	get := func(base string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+"/page", nil)
		req.Host = "www.example.com"
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, "level 1 healthy and both proxies serving it", 30*time.Second, func() bool {
		if agent.site(t, "www")["levels"].(map[string]any)["1"] != "healthy" {
			return false
		}
		for _, p := range proxies {
			if code, body := get(p); code != 200 || body != "ok" {
				return false
			}
		}
		return true
	})

	// The origins of level 1 fail their real traffic; their health path
	// stays green. Load: 8 workers, each a request every 25ms (about 320 a
	// second), over both proxies, until the switch (with passive_votes) or
	// for 20 rounds (without): counted in rounds, not seconds, since a
	// loaded machine runs fewer. The context is only a hang guard.
	sick.Store(true)
	const loadRounds = 20
	startRound := agent.site(t, "www")["round"].(float64)
	loadFor := hangGuard(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), loadFor)
	defer cancel()
	var sent, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			tick := time.NewTicker(25 * time.Millisecond)
			defer tick.Stop()
			for i := w; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if code, _ := get(proxies[i%len(proxies)]); code != 200 {
					failed.Add(1)
				}
				sent.Add(1)
			}
		})
	}
	// votes splits the last round's votes on origin of site into the probe
	// votes and the passive ones (voter NODE/passive), as voter=value.
	votes := func(site map[string]any, name string) (probes, passives []string) {
		o := site["origins"].(map[string]any)[name].(map[string]any)
		for _, raw := range o["votes"].([]any) {
			v := raw.(map[string]any)
			voter, _ := v["voter"].(string)
			s := fmt.Sprintf("%s=%v", voter, v["value"])
			if strings.HasSuffix(voter, "/passive") {
				passives = append(passives, s)
			} else {
				probes = append(probes, s)
			}
		}
		return probes, passives
	}
	switched := false
	var probes, passives, downs []string
	for !switched && ctx.Err() == nil {
		s := agent.site(t, "www")
		switched = s["level"].(float64) == 2
		if !optIn && s["round"].(float64) >= startRound+loadRounds {
			break
		}
		probes, passives = votes(s, "a1")
		for _, p := range passives {
			if strings.HasSuffix(p, "=down") {
				downs = append(downs, p)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	t.Logf("load: %d requests, %d not 200, rounds %v to %v", sent.Load(), failed.Load(), startRound, agent.site(t, "www")["round"])
	t.Logf("last votes on a1: probes %v, passive %v; passive downs seen %d", probes, passives, len(downs))
	if !optIn {
		if switched {
			t.Fatalf("switched to level 2 without passive_votes: the probes are green")
		}
		if len(passives) != 0 {
			t.Fatalf("passive votes without passive_votes: %v", passives)
		}
		if code, body := get(proxies[0]); code != 500 || body != "" {
			t.Fatalf("proxy answer %d %q after the load, want level 1's 500", code, body)
		}
		return
	}
	if !switched {
		t.Fatalf("no switch to level 2 after %s of failing traffic with passive_votes (a hang guard); votes on a1: probes %v, passive %v", loadFor, probes, passives)
	}
	for _, p := range probes {
		if !strings.HasSuffix(p, "=up") {
			t.Fatalf("probe vote %s: the health path is green, want up", p)
		}
	}
	if len(downs) == 0 {
		t.Fatalf("no passive down vote on a1 was seen before the switch: last %v", passives)
	}
	waitFor(t, "the proxies to serve level 2", 10*time.Second, func() bool {
		code, body := get(proxies[0])
		return code == 200 && body == "b1"
	})
}
