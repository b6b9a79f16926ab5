package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/dnspup/fakeapi"
)

// TestEndToEndCarryDecidesANodeSplit runs the documented chain with real
// processes: the node gateway with two real vigil-node agents, the dnspup
// source against a fake Customer API on loopback, and direct. One origin
// answers the two nodes differently (a 1-1 split, below a majority), so it
// passes on to dnspup, whose two checkpoint votes are added to the node votes
// (tally carry) and decide.
func TestEndToEndCarryDecidesANodeSplit(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	// a1 alternates: each round its two node probes get one 200 and one 503.
	var hits atomic.Int64
	split := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if hits.Add(1)%2 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(split.Close)
	steady := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(steady.Close)

	// The checkpoints see a1 down (without touching it, so the split stays
	// the nodes' own) and everything else up.
	api := fakeapi.New(fakeapi.Options{Probe: func(_ context.Context, target string) fakeapi.Result {
		if strings.HasPrefix(target, split.URL) {
			return fakeapi.Result{Status: 503, LatencyMs: 1}
		}
		return fakeapi.Result{Status: 200, LatencyMs: 1}
	}})
	apiSrv := httptest.NewServer(api)
	t.Cleanup(apiSrv.Close)

	dir := t.TempDir()
	gateway := testnet.Addr(t)
	config := filepath.Join(dir, "vigil.hcl")
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
  min_votes = 2
  timeout   = "3s"
  env       = ["VIGIL_NODE_TOKEN"]
  config {
    listen         = %q
    token_env      = "VIGIL_NODE_TOKEN"
    online_timeout = "3s"
  }
}
source "dnspup" {
  plugin    = "vigil-source-dnspup"
  min_votes = 2
  tally     = "carry"
  timeout   = "3s"
  env       = ["DNSPUP_API_KEY", "DNSPUP_API_SECRET"]
  config {
    api_base    = %q
    checkpoints = ["ams-1", "fra-1"]
  }
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = %q }
  origin "a2" { address = %q }
}
`, filepath.Join(dir, "data"), binDir, gateway, apiSrv.URL, split.URL, steady.URL)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIGIL_NODE_TOKEN", "node-secret")
	t.Setenv("DNSPUP_API_KEY", "k")
	t.Setenv("DNSPUP_API_SECRET", "s")
	agent := startAgentProc(t, config)
	for _, id := range []string{"edge-1", "edge-2"} {
		cmd := exec.Command(filepath.Join(binDir, "vigil-node"), "-id", id, "-gateway", gateway, "-token-env", "VIGIL_NODE_TOKEN")
		cmd.Env = append(os.Environ(), "VIGIL_NODE_TOKEN=node-secret")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}

	// Wait for a round where both nodes voted on a1, and check how it was
	// decided.
	var a1 map[string]any
	waitFor(t, "a round with both node votes on a1", 30*time.Second, func() bool {
		a1 = agent.site(t, "www")["origins"].(map[string]any)["a1"].(map[string]any)
		nodeVotes := 0
		for _, v := range a1["votes"].([]any) {
			if v.(map[string]any)["source"] == "node" {
				nodeVotes++
			}
		}
		return nodeVotes == 2
	})
	up, down, checkpoints := 0, 0, 0
	for _, raw := range a1["votes"].([]any) {
		v := raw.(map[string]any)
		switch {
		case v["source"] == "node" && v["value"] == "up":
			up++
		case v["source"] == "node" && v["value"] == "down":
			down++
		case v["source"] == "dnspup" && v["value"] == "down":
			checkpoints++
		}
	}
	if up != 1 || down != 1 || checkpoints != 2 {
		t.Fatalf("votes on a1: %d node up, %d node down, %d checkpoint down; want a 1-1 node split and 2 checkpoint downs: %v", up, down, checkpoints, a1["votes"])
	}
	if a1["verdict"] != "down" || a1["by"] != "dnspup" || fmt.Sprint(a1["asked"]) != "[node dnspup]" {
		t.Fatalf("a1 verdict %v by %v asked %v; want down by dnspup after [node dnspup]", a1["verdict"], a1["by"], a1["asked"])
	}
	a2 := agent.site(t, "www")["origins"].(map[string]any)["a2"].(map[string]any)
	if a2["by"] != "node" {
		t.Fatalf("a2 (the nodes agree) settled by %v, want node", a2["by"])
	}
	if strings.Contains(agent.logText(), "node-secret") {
		t.Fatal("the node token appears in the agent's log")
	}
}
