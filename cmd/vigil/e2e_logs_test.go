package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// TestEndToEndLogsOnceAndStopsClean runs the real agent and plugin through
// a failover and a SIGTERM: each event is logged once, and a clean stop logs
// no ERROR.
func TestEndToEndLogsOnceAndStopsClean(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	backup := httptest.NewServer(demoorigin.New("b1"))
	t.Cleanup(backup.Close)
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
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = %q
    level   = 2
  }
}`, filepath.Join(dir, "data"), binDir, backup.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgentProc(t, config)
	waitFor(t, "the failover to level 2", 15*time.Second, func() bool {
		return p.site(t, "www")["level"] == float64(2)
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(hangGuard(15 * time.Second)):
		t.Fatalf("the agent did not stop within %s of SIGTERM", hangGuard(15*time.Second))
	}
	log := p.logText()
	if n := strings.Count(log, "level switched"); n != 1 {
		t.Errorf("the failover is logged %d times, want once:\n%s", n, log)
	}
	if n := strings.Count(log, "origin a1 is now unhealthy"); n != 1 {
		t.Errorf("a1's state change is logged %d times, want once", n)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "[ERROR]") {
			t.Errorf("a clean run and stop logged an error: %s", line)
		}
	}
	if !strings.Contains(log, "stopped") {
		t.Errorf("no 'stopped' line: the stop was not clean")
	}
}
