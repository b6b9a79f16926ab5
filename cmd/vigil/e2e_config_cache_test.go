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

	"github.com/vigilcdn/vigil/core/config"
	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// TestEndToEndConfigCacheKeepsAutoMTLSOff: a source with auto_mtls =
// false starts its plugin without mutual TLS on the first start, which
// parses the file and writes data_dir/config.cache, on the second start,
// which reads that cache, and after a SIGHUP of the unchanged file. The
// cache of old lost the setting: the second start ran mTLS while the
// configuration said plaintext (and a plugin that cannot do mTLS failed
// with "tls: first record does not look like a TLS handshake").
func TestEndToEndConfigCacheKeepsAutoMTLSOff(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	addr := map[string]string{}
	for _, n := range []string{"a1", "a2"} {
		srv := httptest.NewServer(demoorigin.New(n))
		t.Cleanup(srv.Close)
		addr[n] = srv.URL
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.hcl")
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
  plugin    = "vigil-source-direct"
  timeout   = "2s"
  auto_mtls = false
}
site "www" {
  hostname = "www.example.com"
  health_check { timeout = "500ms" }
  origin "a1" { address = %q }
  origin "a2" { address = %q }
}
`, filepath.Join(dir, "data"), binDir, addr["a1"], addr["a2"])
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	const plaintext = "starting the plugin without mutual TLS"
	healthy := func(p *agentProc) func() bool {
		return func() bool {
			s := p.site(t, "www")
			levels, _ := s["levels"].(map[string]any)
			return levels["1"] == "healthy"
		}
	}
	stop := func(p *agentProc) {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.done:
		case <-time.After(hangGuard(30 * time.Second)):
			t.Fatal("the agent did not stop")
		}
	}

	first := startAgentProc(t, path)
	waitFor(t, "the origins to turn healthy (first start)", 20*time.Second, healthy(first))
	if !strings.Contains(first.logText(), plaintext) {
		t.Fatalf("first start: the plugin was not started without mTLS:\n%s", first.logText())
	}
	stop(first)
	if _, err := os.Stat(filepath.Join(dir, "data", config.CacheFileName)); err != nil {
		t.Fatalf("the first start wrote no configuration cache: %v", err)
	}

	second := startAgentProc(t, path)
	waitFor(t, "the origins to turn healthy (second start, from the cache)", 20*time.Second, healthy(second))
	log := second.logText()
	if !strings.Contains(log, plaintext) {
		t.Fatalf("second start, from the cache: the plugin was started with mTLS although auto_mtls = false:\n%s", log)
	}
	if strings.Contains(log, "first record does not look like a TLS handshake") {
		t.Fatalf("second start: TLS spoken to a plaintext plugin:\n%s", log)
	}
	pid := second.pluginPID(t, "direct")
	if err := second.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload of the unchanged file", 20*time.Second, func() bool {
		return strings.Contains(second.logText(), "configuration reloaded")
	})
	if got := second.pluginPID(t, "direct"); got != pid {
		t.Fatalf("a SIGHUP of the unchanged file restarted the plugin (pid %d, then %d): the reloaded source differs from the running one", pid, got)
	}
}
