package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// TestEndToEndFastConfirmation: a real agent with the real direct plugin,
// round_interval = "10m" and confirm_interval = "1s". The primary refuses
// connections from the start: the first round finds it down while
// unknown, and two confirmation rounds (not rounds: the next round is ten
// minutes away) make it unhealthy and fail the site over to its live
// backup. The deadline only catches a hang; what is asserted is that one
// round and two confirmation rounds did it.
func TestEndToEndFastConfirmation(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // its port now refuses connections
	backup := httptest.NewServer(demoorigin.New("b1"))
	t.Cleanup(backup.Close)

	dir := t.TempDir()
	config := filepath.Join(dir, "vigil.hcl")
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
source "direct" {
  plugin  = "vigil-source-direct"
  timeout = "5s"
}
site "www" {
  hostname = "www.example.com"
  health_check {
    path             = "/cdn-health"
    timeout          = "1s"
    confirm_interval = "1s"
  }
  origin "a1" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), binDir, deadURL, backup.URL)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := startAgentProc(t, config)
	waitFor(t, "the failover to level 2", 2*time.Minute, func() bool {
		for _, ev := range agent.events(t) {
			if e, ok := ev["event"].(map[string]any); ok && e["kind"] == "level_switched" && e["to"] == float64(2) {
				return true
			}
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
	for _, want := range []string{`(?m)^vigil_rounds_total 1$`, `(?m)^vigil_confirm_rounds_total 2$`, `(?m)^vigil_confirm_sites_total 2$`} {
		if !regexp.MustCompile(want).Match(body) {
			t.Errorf("/metrics does not match %s", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", regexp.MustCompile(`(?m)^vigil_(rounds|confirm)_.*$`).FindAll(body, -1))
	}
}
