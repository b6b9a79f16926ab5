package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// TestAgentRefusesDamagedState: a cut or emptied state file stops the real
// agent at start with exit 1 and a message naming the file and the way out
// (never a panic); -fresh-state starts it empty and keeps the old file.
func TestAgentRefusesDamagedState(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
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
  origin "a2" { address = "http://127.0.0.1:2" }
}
`, data, binDir)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgentProc(t, config)
	waitFor(t, "a few rounds", 20*time.Second, func() bool { return p.site(t, "www")["round"].(float64) >= 3 })
	_ = p.cmd.Process.Kill()
	<-p.done
	db := filepath.Join(data, "vigil.db")
	good, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "vigil"), append([]string{"agent", "-config", config}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return ee.ExitCode(), out.String()
			}
			return 0, out.String()
		case <-time.After(hangGuard(20 * time.Second)):
			_ = cmd.Process.Kill()
			<-done
			return -1, out.String()
		}
	}
	tests := []struct {
		name   string
		damage func()
		want   []string
	}{
		{"cut to half", func() { _ = os.WriteFile(db, good[:len(good)/2], 0o600) }, []string{db, "vigil state restore", "-fresh-state"}},
		{"emptied", func() { _ = os.WriteFile(db, nil, 0o600) }, []string{db, "-fresh-state"}},
		{"gone", func() { _ = os.Remove(db) }, []string{db, "-fresh-state"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.damage()
			code, out := run()
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, out)
			}
			if strings.Contains(out, "panic") || strings.Contains(out, "fault address") || strings.Contains(out, "goroutine ") {
				t.Fatalf("the agent crashed instead of refusing:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Fatalf("the refusal does not say %q:\n%s", w, out)
				}
			}
		})
	}
	t.Run("fresh-state starts empty and keeps the old file", func(t *testing.T) {
		_ = os.WriteFile(db, good[:len(good)/2], 0o600)
		cmd := exec.Command(filepath.Join(binDir, "vigil"), "agent", "-config", config, "-fresh-state")
		out := &sdktest.LogBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		waitFor(t, "the agent to start", 20*time.Second, func() bool { return strings.Contains(out.String(), "vigil agent started") })
		if !strings.Contains(out.String(), "starting with an empty state") {
			t.Fatalf("no warning about the fresh start:\n%s", out.String())
		}
		kept, _ := filepath.Glob(filepath.Join(data, "vigil.db.damaged-*"))
		if len(kept) == 0 {
			t.Fatalf("the damaged file was not kept aside")
		}
	})
}
