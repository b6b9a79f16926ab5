package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// TestHungPluginStartHoldsNothing: the direct plugin is killed and its
// next start hangs before the handshake. Rounds go on within their
// deadline, a manual switch answers and SIGTERM stops the agent while the
// start still hangs; once the plugin starts again, it votes.
func TestHungPluginStartHoldsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	dir := t.TempDir()
	hang := filepath.Join(dir, "hang")
	// A wrapper that hangs before the real plugin's handshake while the
	// file exists (the plugin gets no environment: the path is written in).
	wrapper := filepath.Join(dir, "vigil-source-slow")
	script := fmt.Sprintf("#!/bin/sh\nwhile [ -e %q ]; do sleep 0.05; done\nexec %q\n", hang, filepath.Join(binDir, "vigil-source-direct"))
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, n := range []string{"a1", "a2", "b1"} {
		srv := httptest.NewServer(demoorigin.New(n))
		t.Cleanup(srv.Close)
		addrs = append(addrs, srv.URL)
	}
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = "300ms"
  data_dir       = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "direct" {
  plugin  = %q
  timeout = "1s"
}
site "www" {
  hostname = "www.example.com"
  health_check { timeout = "300ms" }
  origin "a1" { address = %q }
  origin "a2" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), wrapper, addrs[0], addrs[1], addrs[2])
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgentProc(t, config)
	waitFor(t, "the first votes", 20*time.Second, func() bool { return p.site(t, "www")["levels"].(map[string]any)["1"] == "healthy" })

	// Kill the plugin with the hang armed: every restart now hangs.
	if err := os.WriteFile(hang, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	pid := p.pluginPID(t, "direct")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	round := p.site(t, "www")["round"].(float64)
	waitFor(t, "rounds to go on while the restart hangs", 15*time.Second, func() bool {
		return p.site(t, "www")["round"].(float64) >= round+5
	})
	if !strings.Contains(p.logText(), "restarting and was not ready by the deadline") {
		t.Errorf("no round said the plugin was restarting:\n%s", p.logText())
	}

	// A manual switch answers while the start still hangs (it hangs until
	// the file goes: a switch that waited for the plugin would never
	// answer, and the client's hang guard would catch it).
	req, _ := http.NewRequest("POST", p.api+"/v1/sites/www/switch", strings.NewReader(`{"level": 2}`))
	req.Header.Set("Authorization", "Bearer e2e-token")
	start := time.Now()
	resp, err := (&http.Client{Timeout: hangGuard(time.Second)}).Do(req)
	if err != nil {
		t.Fatalf("manual switch while the plugin's start hangs: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("manual switch while the plugin's start hangs: %d", resp.StatusCode)
	}
	t.Logf("manual switch answered in %v while the plugin's start hangs", time.Since(start).Round(time.Millisecond))

	// The plugin starts again: it votes.
	if err := os.Remove(hang); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the restarted plugin's votes", 30*time.Second, func() bool {
		votes, _ := p.site(t, "www")["origins"].(map[string]any)["a1"].(map[string]any)["votes"].([]any)
		return len(votes) > 0
	})

	// With the hang armed again, SIGTERM stops the agent promptly.
	if err := os.WriteFile(hang, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	pid = p.pluginPID(t, "direct")
	before := strings.Count(p.logText(), "was not ready by the deadline")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a round to find the plugin restarting", 15*time.Second, func() bool {
		return strings.Count(p.logText(), "was not ready by the deadline") > before
	})
	start = time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The start hangs for ever: an agent that waited for it would never
	// stop, which the hang guard catches.
	select {
	case <-p.done:
	case <-time.After(hangGuard(10 * time.Second)):
		t.Fatalf("SIGTERM did not stop the agent in %s while a plugin start hangs", hangGuard(10*time.Second))
	}
	t.Logf("SIGTERM stopped the agent in %v while a plugin start hangs", time.Since(start).Round(time.Millisecond))
}
