package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
	"github.com/vigilcdn/vigil/internal/testnet"
)

// alertmanager is a real Alertmanager (Debian's prometheus-alertmanager)
// on loopback, restartable on the same address.
type alertmanager struct {
	t          *testing.T
	bin, addr  string
	configPath string
	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{}
}

// requireTool returns a tool's path, or skips (fails, with CI set) when
// it is not installed.
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (Debian's %s; make deps installs it)", name, pkg)
		}
		t.Skipf("%s not installed (make deps installs Debian's %s)", name, pkg)
	}
	return p
}

func startAlertmanager(t *testing.T) *alertmanager {
	t.Helper()
	am := &alertmanager{t: t, bin: requireTool(t, "prometheus-alertmanager", "prometheus-alertmanager"), addr: testnet.Addr(t)}
	am.configPath = filepath.Join(t.TempDir(), "alertmanager.yml")
	// One route to a receiver that sends nothing: the test reads the
	// alerts through the API and amtool.
	cfg := "route:\n  receiver: \"null\"\n  group_wait: 1s\nreceivers:\n  - name: \"null\"\n"
	if err := os.WriteFile(am.configPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	am.start()
	t.Cleanup(am.stop)
	return am
}

// start runs Alertmanager with a fresh, empty storage and waits until it
// is ready.
func (am *alertmanager) start() {
	am.t.Helper()
	cmd := exec.Command(am.bin, "--config.file="+am.configPath, "--storage.path="+am.t.TempDir(),
		"--web.listen-address="+am.addr, "--cluster.listen-address=")
	out, err := os.Create(filepath.Join(am.t.TempDir(), "alertmanager.log"))
	if err != nil {
		am.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		am.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(done) }()
	am.mu.Lock()
	am.cmd, am.done = cmd, done
	am.mu.Unlock()
	waitFor(am.t, "Alertmanager to be ready", 20*time.Second, func() bool {
		resp, err := http.Get("http://" + am.addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (am *alertmanager) stop() {
	am.mu.Lock()
	cmd, done := am.cmd, am.done
	am.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// amtoolAlerts is what `amtool alert query` lists as firing: for each
// alert, its labels.
func amtoolAlerts(t *testing.T, amtool, addr string, matchers ...string) []map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := append([]string{"alert", "query", "--alertmanager.url=http://" + addr, "-o", "json"}, matchers...)
	out, err := exec.CommandContext(ctx, amtool, args...).Output()
	if err != nil {
		t.Fatalf("amtool %v: %v", args, err)
	}
	var alerts []struct {
		Labels map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(out, &alerts); err != nil {
		t.Fatalf("amtool's answer %s: %v", out, err)
	}
	var labels []map[string]string
	for _, a := range alerts {
		labels = append(labels, a.Labels)
	}
	return labels
}

func hasSite(alerts []map[string]string, site string) bool {
	for _, l := range alerts {
		if l["site"] == site {
			return true
		}
	}
	return false
}

// TestEndToEndAlertmanager: the real agent alerts a real Alertmanager:
// two sites that fail over fire VigilSiteOnBackupLevel (checked with
// amtool), a failback resolves its alert, and after an Alertmanager
// restart the firing alerts are back within a resend interval or so.
func TestEndToEndAlertmanager(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	amtool := requireTool(t, "amtool", "prometheus-alertmanager")
	am := startAlertmanager(t)
	origins := map[string]*demoorigin.Server{}
	addr := map[string]string{}
	for _, n := range []string{"www-a", "www-b", "shop-a", "shop-b"} {
		s := demoorigin.New(n)
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		origins[n], addr[n] = s, srv.URL
	}
	origins["www-a"].SetMode(demoorigin.Failing)
	origins["shop-a"].SetMode(demoorigin.Failing)
	dir := t.TempDir()
	config := filepath.Join(dir, "vigil.hcl")
	site := func(name string) string {
		return fmt.Sprintf(`
site %q {
  hostname = "%s.example.com"
  health_check {
    unhealthy_threshold = 2
    healthy_threshold   = 2
  }
  origin "a" { address = %q }
  origin "b" {
    address = %q
    level   = 2
  }
}`, name, name, addr[name+"-a"], addr[name+"-b"])
	}
	cfg := fmt.Sprintf(`
control {
  round_interval = "200ms"
  data_dir       = %q
  plugin_dir     = %q
  api { listen = "127.0.0.1:0" }
}
source "direct" { plugin = "vigil-source-direct" }
notify "alertmanager" "am" {
  urls            = ["http://%s"]
  installation    = "e2e"
  resend_interval = "1s"
}
`, filepath.Join(dir, "data"), binDir, am.addr) + site("www") + site("shop")
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgentProc(t, config)
	backup := []string{"alertname=VigilSiteOnBackupLevel", "vigil=e2e"}
	waitFor(t, "both failovers to fire in Alertmanager (amtool)", 30*time.Second, func() bool {
		a := amtoolAlerts(t, amtool, am.addr, backup...)
		return hasSite(a, "www") && hasSite(a, "shop")
	})
	if a := amtoolAlerts(t, amtool, am.addr, "alertname=VigilOriginUnhealthy", "site=www"); len(a) != 1 || a[0]["origin"] != "a" || a[0]["level"] != "1" {
		t.Errorf("VigilOriginUnhealthy of www: %v", a)
	}

	// www's primary recovers: the failback resolves its alert; shop's
	// stays.
	origins["www-a"].SetMode(demoorigin.Healthy)
	waitFor(t, "www's failback", 20*time.Second, func() bool { return p.site(t, "www")["level"] == float64(1) })
	waitFor(t, "www's alert to be resolved", 20*time.Second, func() bool {
		return !hasSite(amtoolAlerts(t, amtool, am.addr, backup...), "www")
	})
	if !hasSite(amtoolAlerts(t, amtool, am.addr, backup...), "shop") {
		t.Fatal("shop's alert was resolved with www's")
	}

	// Alertmanager restarts with an empty storage: shop's alert, still
	// firing, comes back with the next sends.
	am.stop()
	am.start()
	restarted := time.Now()
	if hasSite(amtoolAlerts(t, amtool, am.addr, backup...), "shop") {
		t.Log("the alert was back before the first query")
	}
	waitFor(t, "shop's alert back after the Alertmanager restart", 10*time.Second, func() bool {
		return hasSite(amtoolAlerts(t, amtool, am.addr, backup...), "shop")
	})
	// No bound on how long it took: nothing changes in vigil's state
	// after the restart, so only the resends (resend_interval 1s) can
	// bring it back, and without them the wait would not end.
	t.Logf("the firing alert came back %v after the restart, with resend_interval 1s", time.Since(restarted).Round(time.Millisecond))
}
