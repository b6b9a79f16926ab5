package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestAgentWithoutConfigReadsTheDefault: without -config the agent reads
// defaultConfigPath, and says what to do when there is none.
func TestAgentWithoutConfigReadsTheDefault(t *testing.T) {
	old := defaultConfigPath
	t.Cleanup(func() { defaultConfigPath = old })
	defaultConfigPath = filepath.Join(t.TempDir(), "vigil.hcl")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"agent"}, &stdout, &stderr); code != 2 {
		t.Fatalf("vigil agent without a default config = %d, want 2", code)
	}
	if msg := stderr.String(); !strings.Contains(msg, defaultConfigPath) || !strings.Contains(msg, "-dev") {
		t.Errorf("the error names neither the default path nor -dev: %s", msg)
	}
	// An invalid default is read, and refused with its diagnostics.
	if err := os.WriteFile(defaultConfigPath, []byte("control {\n  round_interval = 5\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := run([]string{"agent"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), defaultConfigPath) {
		t.Errorf("vigil agent with an invalid default = %d, stderr:\n%s", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"agent", "-dev", "-config", defaultConfigPath}, &stdout, &stderr); code != 2 {
		t.Errorf("-dev with -config = %d, want 2 (usage)", code)
	}
}

// TestEndToEndAgentDev runs `vigil agent -dev` from an empty folder with
// the built binaries only: its demo site fails over when the sandbox's
// level-1 origins fail, the status page serves, and the sandbox's folder
// is gone after SIGTERM.
func TestEndToEndAgentDev(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	work := t.TempDir()
	listenFile := filepath.Join(work, "listen")
	cmd := exec.Command(filepath.Join(binDir, "vigil"), "agent", "-dev", "-dev-listen", "127.0.0.1:0", "-listen-file", listenFile)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "VIGIL_TOKEN=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var log strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	logText := func() string { mu.Lock(); defer mu.Unlock(); return log.String() }
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("agent log:\n%s", logText())
		}
	})
	var api string
	waitFor(t, "the sandbox's API", 30*time.Second, func() bool {
		b, err := os.ReadFile(listenFile)
		api = strings.TrimSpace(string(b))
		return err == nil
	})
	m := regexp.MustCompile(`export VIGIL_TOKEN=(\S+)`).FindStringSubmatch(logText())
	if m == nil {
		t.Fatalf("-dev printed no operator token")
	}
	token := m[1]
	site := func() map[string]any {
		resp, err := http.Get(api + "/v1/sites/demo")
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
	origins, _ := site()["origins"].(map[string]any)
	if len(origins) != 3 {
		t.Fatalf("the sandbox's site has %d origins, want a1, a2, b1", len(origins))
	}
	for _, name := range []string{"a1", "a2"} {
		addr, _ := origins[name].(map[string]any)["address"].(string)
		if !strings.HasPrefix(addr, "http://127.0.0.1:") {
			t.Fatalf("origin %s's address %q is not on loopback", name, addr)
		}
		resp, err := http.Post(addr+"/-/fail", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	waitFor(t, "the sandbox's failover to level 2", 90*time.Second, func() bool {
		return site()["level"] == float64(2)
	})
	resp, err := http.Get(api + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the status page answered %s", resp.Status)
	}
	// The printed token is the operator's.
	var out, errOut bytes.Buffer
	if code := run([]string{"switch", "-address", api, "-token", token, "demo", "2"}, &out, &errOut); code != 0 {
		t.Errorf("vigil switch with the sandbox's token = %d: %s", code, errOut.String())
	}
	state := regexp.MustCompile(`state in (\S+), removed at exit`).FindStringSubmatch(logText())
	if state == nil {
		t.Fatalf("-dev did not say where its state is")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the sandbox did not stop within 30s of SIGTERM")
	}
	if _, err := os.Stat(state[1]); !os.IsNotExist(err) {
		t.Errorf("the sandbox's folder %s is still there after it stopped (%v)", state[1], err)
	}
	if entries, _ := os.ReadDir(work); len(entries) != 1 {
		t.Errorf("the sandbox wrote into the folder it ran in: %v", entries)
	}
}
