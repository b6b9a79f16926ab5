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
	"testing"
	"time"

	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
	"github.com/vigilcdn/vigil/internal/testnet"
)

// TestEndToEndFailbackRamp: the real agent and a real vigil-node proxy. The
// primary fails (failover), recovers, and the failback ramps: while the
// site view says 25 per cent, about a quarter of the requests through the
// proxy reach the primary; once the ramp is over, all of them do.
func TestEndToEndFailbackRamp(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	origins := map[string]*demoorigin.Server{}
	addr := map[string]string{}
	for _, n := range []string{"a1", "b1"} {
		s := demoorigin.New(n)
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		origins[n], addr[n] = s, srv.URL
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`
control {
  round_interval = "200ms"
  data_dir       = %q
  plugin_dir     = %q
  api { listen = "127.0.0.1:0" }
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check {
    unhealthy_threshold = 1
    healthy_threshold   = 1
    ramp {
      steps    = [25, 100]
      interval = "6s"
    }
  }
  origin "a1" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}`, filepath.Join(dir, "data"), binDir, addr["a1"], addr["b1"])), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := startAgentProc(t, config)
	listen := testnet.Addr(t)
	node := exec.Command(filepath.Join(binDir, "vigil-node"), "-id", "edge-1", "-control-plane", agent.api,
		"-state-dir", filepath.Join(dir, "node"), "-proxy-listen", listen)
	var nodeLog strings.Builder
	var logMu sync.Mutex
	node.Stderr = writerFunc(func(p []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return nodeLog.Write(p) })
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = node.Process.Kill()
		_ = node.Wait()
		if t.Failed() {
			logMu.Lock()
			t.Logf("vigil-node log:\n%s", nodeLog.String())
			logMu.Unlock()
		}
	})
	client := &http.Client{Timeout: 5 * time.Second}
	get := func() string {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+listen+"/", nil)
		req.Host = "www.example.com"
		resp, err := client.Do(req)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, n := range []string{"a1", "b1"} {
			if strings.Contains(string(b), "hello from "+n) {
				return n
			}
		}
		return ""
	}
	waitFor(t, "the proxy to serve a1", 20*time.Second, func() bool { return get() == "a1" })

	origins["a1"].SetMode(demoorigin.Failing)
	waitFor(t, "the failover to level 2, served by the proxy", 20*time.Second, func() bool {
		return agent.site(t, "www")["level"] == float64(2) && get() == "b1"
	})
	origins["a1"].SetMode(demoorigin.Healthy)
	weight := func() float64 {
		r, _ := agent.site(t, "www")["ramp"].(map[string]any)
		w, _ := r["weight"].(float64)
		return w
	}
	waitFor(t, "the failback ramp at 25%", 20*time.Second, func() bool { return weight() == 25 })
	// Count while the view still says 25: the proxy follows the
	// publication within a long poll.
	waitFor(t, "the proxy to follow the ramp", 10*time.Second, func() bool {
		seen := map[string]int{}
		for range 40 {
			seen[get()]++
		}
		return seen["a1"] > 0 && seen["b1"] > 0
	})
	counts := map[string]int{}
	for range 400 {
		counts[get()]++
	}
	if w := weight(); w != 25 {
		t.Skipf("the ramp moved on (weight %v) while the requests were counted; the machine is too slow for this interval", w)
	}
	share := float64(counts["a1"]) / float64(counts["a1"]+counts["b1"])
	if share < 0.20 || share > 0.30 || counts[""] > 0 {
		t.Fatalf("at weight 25: a1 %d, b1 %d, failed %d (a1's share %.2f, want 0.25 ± 0.05)", counts["a1"], counts["b1"], counts[""], share)
	}
	t.Logf("at weight 25: a1 %d, b1 %d of 400 (%.1f%%)", counts["a1"], counts["b1"], 100*share)

	waitFor(t, "the ramp to end on level 1", 30*time.Second, func() bool {
		_, ramping := agent.site(t, "www")["ramp"].(map[string]any)
		return !ramping && agent.site(t, "www")["level"] == float64(1)
	})
	waitFor(t, "the proxy to send everything to a1", 10*time.Second, func() bool {
		for range 20 {
			if get() != "a1" {
				return false
			}
		}
		return true
	})
	counts = map[string]int{}
	for range 200 {
		counts[get()]++
	}
	if counts["a1"] != 200 {
		t.Fatalf("after the ramp: %v, want all 200 on a1", counts)
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
