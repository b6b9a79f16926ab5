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
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
)

// TestEndToEndPassiveTriggerConfirms: the passive trigger end to end,
// through a real agent, the node gateway and a real vigil-node proxying
// visitors. round_interval = "10m" and confirm_interval = "1s": after the
// first round (everything healthy) no round comes for ten minutes. When
// the primary starts failing, the node's passive window trips, the
// gateway reports the site, the agent confirms it at once and twice more,
// and the site fails over: by the trigger and the confirmations alone
// (asserted on /metrics: one round, and no confirmation before the
// trigger, since nothing was in doubt). The deadline only catches a hang.
func TestEndToEndPassiveTriggerConfirms(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	var sick atomic.Bool
	a1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if sick.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = io.WriteString(w, "a1")
	}))
	t.Cleanup(a1.Close)
	b1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "b1") }))
	t.Cleanup(b1.Close)

	dir := t.TempDir()
	gateway := testnet.Addr(t)
	cfg := fmt.Sprintf(`
control {
  round_interval = "10m"
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
  timeout   = "5s"
  env       = ["VIGIL_NODE_TOKEN"]
  config {
    listen         = %q
    token_env      = "VIGIL_NODE_TOKEN"
    online_timeout = "3s"
    passive_votes  = true
    # vigil-node's proxy skips an origin after 3 failures in a row and
    # serves the visitors from the backup: the window sees those 3.
    passive_min_requests = 3
  }
}
source "direct" {
  plugin  = "vigil-source-direct"
  timeout = "5s"
}
site "www" {
  hostname = "www.example.com"
  health_check {
    timeout           = "1s"
    healthy_threshold = 1
    confirm_interval  = "1s"
  }
  origin "a1" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), binDir, gateway, a1.URL, b1.URL)
	config := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIGIL_NODE_TOKEN", "node-secret")
	agent := startAgentProc(t, config)

	proxy := testnet.Addr(t)
	node := exec.Command(filepath.Join(binDir, "vigil-node"), "-id", "edge-1", "-gateway", gateway, "-token-env", "VIGIL_NODE_TOKEN",
		"-control-plane", agent.api, "-control-plane-token-env", "VIGIL_TOKEN", "-proxy-listen", proxy)
	node.Env = append(os.Environ(), "VIGIL_NODE_TOKEN=node-secret", "VIGIL_TOKEN=e2e-token")
	var nodeLog strings.Builder
	node.Stderr = &nodeLog
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = node.Process.Kill()
		_ = node.Wait()
		if t.Failed() {
			t.Logf("vigil-node log:\n%s", nodeLog.String())
		}
	})
	client := &http.Client{Timeout: 2 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	get := func() (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+proxy+"/page", nil)
		req.Host = "www.example.com"
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, "level 1 healthy and the proxy serving it", time.Minute, func() bool {
		if agent.site(t, "www")["levels"].(map[string]any)["1"] != "healthy" {
			return false
		}
		code, body := get()
		return code == 200 && body == "a1"
	})

	// The first round ran before the node was online. The gateway watches
	// only origins a ballot named to it: a dry-run probe (vigil probe)
	// names them, without a round.
	waitFor(t, "the node voting in a probe", time.Minute, func() bool {
		res, err := agent.client().Probe(context.Background(), "www")
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		for _, o := range res.Origins {
			for _, v := range o.Votes {
				if o.Origin == "a1" && v.Voter == "edge-1" && v.Value == "up" {
					return true
				}
			}
		}
		return false
	})

	// The primary fails its real traffic (and its probes). Visitors keep
	// coming, a bounded trickle, until the site is on level 2.
	sick.Store(true)
	requests := 0
	waitFor(t, "the failover to level 2", 2*time.Minute, func() bool {
		if agent.site(t, "www")["level"].(float64) == 2 {
			return true
		}
		for range 5 {
			get()
			requests++
		}
		return false
	})
	resp, err := http.Get(agent.api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^vigil_rounds_total 1$`,                                   // the first round only
		`(?m)^vigil_confirm_suspects_total\{result="accepted"\} [1-9]`, // the trigger
		`(?m)^vigil_confirm_rounds_total [3-9]`,                        // a1 down three times
	} {
		if !regexp.MustCompile(want).Match(body) {
			t.Errorf("/metrics does not match %s", want)
		}
	}
	if t.Failed() {
		t.Logf("%d requests; metrics:\n%s", requests, regexp.MustCompile(`(?m)^vigil_(rounds|confirm)_.*$`).FindAll(body, -1))
	}
}
