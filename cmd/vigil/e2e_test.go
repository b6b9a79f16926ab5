package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// binDir holds the real binaries the end-to-end tests run.
var binDir string

func TestMain(m *testing.M) {
	code := func() int {
		flag.Parse()
		if testing.Short() {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "vigil-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		args := []string{"build", "-o", dir + "/"}
		if raceEnabled {
			// The agent, the engine and the plugins run with the race
			// detector too: the processes are where the concurrency is.
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args,
			"github.com/vigilcdn/vigil/cmd/vigil",
			"github.com/vigilcdn/vigil/plugins/direct/cmd/vigil-source-direct",
			"github.com/vigilcdn/vigil/plugins/node/cmd/vigil-source-node",
			"github.com/vigilcdn/vigil/plugins/node/cmd/vigil-node",
			"github.com/vigilcdn/vigil/plugins/dnspup/cmd/vigil-source-dnspup")...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building the binaries:", err)
			return 1
		}
		// The agent again, with the fault-injection hooks (fault_on.go).
		fault := exec.Command("go", append(append([]string{"build", "-tags", "faultinject", "-o", filepath.Join(dir, "fault") + "/"}, args[3:]...),
			"github.com/vigilcdn/vigil/cmd/vigil")...)
		fault.Stdout, fault.Stderr = os.Stderr, os.Stderr
		if err := fault.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building the fault-injection agent:", err)
			return 1
		}
		binDir = dir
		return m.Run()
	}()
	os.Exit(code)
}

// agentProc is a running `vigil agent` subprocess. The test learns its
// API's address from -listen-file and its plugins' processes from GET
// /v1/sources, not from its log.
type agentProc struct {
	cmd  *exec.Cmd
	api  string
	done chan struct{}
	mu   sync.Mutex
	log  strings.Builder
}

func startAgentProc(t *testing.T, config string) *agentProc {
	t.Helper()
	return startAgentBin(t, filepath.Join(binDir, "vigil"), config)
}

// startAgentBin starts the agent binary bin with config and the extra
// environment variables env.
func startAgentBin(t *testing.T, bin, config string, env ...string) *agentProc {
	t.Helper()
	return startAgentArgs(t, bin, config, nil, env...)
}

// startAgentArgs is startAgentBin with more flags for the agent.
func startAgentArgs(t *testing.T, bin, config string, flags []string, env ...string) *agentProc {
	t.Helper()
	listenFile := filepath.Join(t.TempDir(), "listen")
	cmd := exec.Command(bin, append([]string{"agent", "-config", config, "-log-level", "debug", "-listen-file", listenFile}, flags...)...)
	cmd.Env = append(append(os.Environ(), "VIGIL_TOKEN=e2e-token"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &agentProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		// With -race the agent and its plugins report data races on stderr
		// (the plugins' through the agent's log).
		if strings.Contains(p.logText(), "WARNING: DATA RACE") {
			t.Errorf("the race detector found a data race in the agent or a plugin")
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", p.logText())
		}
	})
	// The agent writes the listen file (by rename, so whole) once its API
	// listens.
	deadline := time.After(hangGuard(30 * time.Second))
	for {
		if b, err := os.ReadFile(listenFile); err == nil {
			p.api = strings.TrimSpace(string(b))
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("agent exited before it started:\n%s", p.logText())
		case <-deadline:
			t.Fatalf("agent did not start in %s:\n%s", hangGuard(30*time.Second), p.logText())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// client is a typed API client of the agent, with the test's token.
func (p *agentProc) client() *api.Client { return api.NewClient(p.api, "e2e-token") }

// pluginPIDs are the processes of the agent's plugins now (GET
// /v1/sources), by source name; a source between a crash and its restart
// has none.
func (p *agentProc) pluginPIDs(t *testing.T) map[string]int {
	t.Helper()
	sources, err := p.client().Sources(context.Background())
	if err != nil {
		t.Fatalf("GET /v1/sources: %v", err)
	}
	pids := map[string]int{}
	for _, s := range sources {
		if s.PID != 0 {
			pids[s.Name] = s.PID
		}
	}
	return pids
}

// pluginPID is the process of source's plugin now; the test fails when it
// has none (a pid of 0 must never reach kill(2): it means the caller's
// whole process group).
func (p *agentProc) pluginPID(t *testing.T, source string) int {
	t.Helper()
	pid := p.pluginPIDs(t)[source]
	if pid <= 0 {
		t.Fatalf("source %s has no plugin process (GET /v1/sources)", source)
	}
	return pid
}

func (p *agentProc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *agentProc) site(t *testing.T, name string) map[string]any {
	t.Helper()
	resp, err := http.Get(p.api + "/v1/sites/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func (p *agentProc) events(t *testing.T) []map[string]any {
	t.Helper()
	resp, err := http.Get(p.api + "/v1/events?limit=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Events []map[string]any `json:"events"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Events
}

// waitFor polls cond (a running process cannot signal us) until it holds.
// timeout is what the wait takes on a
// slow idle machine; the deadline is hangGuard(timeout), which only
// catches a hang: the tests wait on events, never on wall-clock bounds,
// and they must pass on a machine many times slower than idle (two
// CPU-bound processes beside the whole suite).
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	guard := hangGuard(timeout)
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (a hang guard, not a speed bound)", guard, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hangGuard is the deadline of a wait that takes up to d on an idle
// machine: five times d, and at least a minute.
func hangGuard(d time.Duration) time.Duration { return max(5*d, time.Minute) }

func processGone(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil {
		return true
	}
	// A zombie still answers kill 0; read its state.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] == "Z"
}

func TestEndToEndFailoverWebhookAndKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	origins := map[string]*demoorigin.Server{}
	addr := map[string]string{}
	for _, n := range []string{"a1", "a2", "b1"} {
		s := demoorigin.New(n)
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		origins[n], addr[n] = s, srv.URL
	}
	notices := make(chan map[string]any, 100)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if json.Unmarshal(b, &m) == nil {
			notices <- m
		}
	}))
	t.Cleanup(hook.Close)

	dir := t.TempDir()
	config := filepath.Join(dir, "vigil.hcl")
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
  plugin  = "vigil-source-direct"
  timeout = "2s"
}
notify "webhook" "ops" {
  url    = %q
  format = "json"
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
`, filepath.Join(dir, "data"), binDir, hook.URL+"/hook?token=hook-secret", addr["a1"], addr["a2"], addr["b1"])
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	agent := startAgentProc(t, config)
	waitFor(t, "the origins to turn healthy", 20*time.Second, func() bool {
		s := agent.site(t, "www")
		return s["levels"].(map[string]any)["1"] == "healthy"
	})

	origins["a1"].SetMode(demoorigin.Failing)
	origins["a2"].SetMode(demoorigin.Failing)
	failedAt := uint64(agent.site(t, "www")["round"].(float64))
	waitFor(t, "the switch to level 2", 20*time.Second, func() bool {
		return agent.site(t, "www")["level"].(float64) == 2
	})
	switchedAt := uint64(agent.site(t, "www")["round"].(float64))
	if rounds := switchedAt - failedAt; rounds > 3+1 {
		t.Fatalf("switched %d rounds after the failure; want at most unhealthy_threshold+1 = 4", rounds)
	}

	// The webhook receives the notice.
	deadline := time.After(hangGuard(20 * time.Second))
	for got := false; !got; {
		select {
		case n := <-notices:
			got = n["title"] == "Origin level switched automatically"
		case <-deadline:
			t.Fatal("the webhook never received \"Origin level switched automatically\"")
		}
	}
	if strings.Contains(agent.logText(), "hook-secret") {
		t.Fatal("the webhook URL's secret appears in the agent's log")
	}

	// kill -9: the agent dies, and its plugin with it.
	before := agent.events(t)
	var pids []int
	for _, pid := range agent.pluginPIDs(t) {
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		t.Fatal("GET /v1/sources lists no plugin process")
	}
	if err := agent.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-agent.done
	for _, pid := range pids {
		waitFor(t, fmt.Sprintf("plugin process %d to exit after the host's SIGKILL", pid), 10*time.Second, func() bool { return processGone(pid) })
	}

	again := startAgentProc(t, config)
	s := again.site(t, "www")
	if s["level"].(float64) != 2 {
		t.Fatalf("level %v after kill -9 and restart, want 2", s["level"])
	}
	after := again.events(t)
	if len(after) < len(before) {
		t.Fatalf("%d events after restart, %d before: events were lost", len(after), len(before))
	}
	for i := range before {
		if after[i]["seq"] != before[i]["seq"] {
			t.Fatalf("event %d changed across the restart: %v vs %v", i, before[i], after[i])
		}
	}
	// A few more rounds with the same failure: no repeated switch.
	round := uint64(again.site(t, "www")["round"].(float64))
	waitFor(t, "three more rounds", 20*time.Second, func() bool {
		return uint64(again.site(t, "www")["round"].(float64)) >= round+3
	})
	switches := 0
	for _, e := range again.events(t) {
		if ev := e["event"].(map[string]any); ev["kind"] == "level_switched" {
			switches++
		}
	}
	if switches != 1 {
		t.Fatalf("%d level switches in the journal, want exactly 1", switches)
	}
}

func TestEndToEndReloadAppliesAndRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	var addrs []string
	for _, n := range []string{"a1", "a2", "a3"} {
		srv := httptest.NewServer(demoorigin.New(n))
		t.Cleanup(srv.Close)
		addrs = append(addrs, srv.URL)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "vigil.hcl")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	head := fmt.Sprintf(`
control {
  round_interval = "200ms"
  data_dir       = %q
  plugin_dir     = %q
  api { listen = "127.0.0.1:0" }
}
source "direct" { plugin = "vigil-source-direct" }
`, filepath.Join(dir, "data"), binDir)
	write(head + fmt.Sprintf(`
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = %q }
  origin "a2" { address = %q }
}`, addrs[0], addrs[1]))
	agent := startAgentProc(t, config)
	if n := len(agent.site(t, "www")["origins"].(map[string]any)); n != 2 {
		t.Fatalf("%d origins before reload", n)
	}

	t.Run("applies", func(t *testing.T) {
		write(head + fmt.Sprintf(`
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = %q }
  origin "a2" { address = %q }
  origin "a3" { address = %q }
}`, addrs[0], addrs[1], addrs[2]))
		if err := agent.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "origin a3 after SIGHUP", 10*time.Second, func() bool {
			_, ok := agent.site(t, "www")["origins"].(map[string]any)["a3"]
			return ok
		})
	})
	t.Run("refuses", func(t *testing.T) {
		write(head + `
site "www" {
  hostname = "www.example.com"
  failback = "sometimes"
  origin "a1" { address = "http://127.0.0.1:1" }
}`)
		if err := agent.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the refusal in the log", 10*time.Second, func() bool {
			return strings.Contains(agent.logText(), "configuration not reloaded")
		})
		logText := agent.logText()
		if !strings.Contains(logText, "Invalid failback") || !strings.Contains(logText, "vigil.hcl line 12") {
			t.Fatalf("the refusal does not show the diagnostic with file:line:\n%s", logText)
		}
		if n := len(agent.site(t, "www")["origins"].(map[string]any)); n != 3 {
			t.Fatalf("%d origins after a refused reload, want the old 3", n)
		}
	})
}
