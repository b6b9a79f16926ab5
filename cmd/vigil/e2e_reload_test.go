package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// TestEndToEndReloadGaugeJSONLogAndCommand runs the real agent with
// -log-json and reloads it by SIGHUP and by `vigil reload`: a refused
// reload drops vigil_config_last_reload_successful to 0 (it stayed 1 on a
// SIGHUP whose file was invalid), a good one sets it back to 1, `vigil
// reload` answers what it applied or the diagnostics, and every line of
// the log stays JSON.
func TestEndToEndReloadGaugeJSONLogAndCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	backup := httptest.NewServer(demoorigin.New("b1"))
	t.Cleanup(backup.Close)
	dir := t.TempDir()
	config := filepath.Join(dir, "vigil.hcl")
	head := fmt.Sprintf(`
control {
  round_interval = "200ms"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "direct" { plugin = "vigil-source-direct" }
`, filepath.Join(dir, "data"), binDir)
	good := head + fmt.Sprintf(`
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = %q
    level   = 2
  }
}`, backup.URL)
	bad := head + `
site "www" {
  hostname = "www.example.com"
  failback = "sometimes"
  origin "a1" { address = "http://127.0.0.1:1" }
}`
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(good)
	p := startAgentArgs(t, filepath.Join(binDir, "vigil"), config, []string{"-log-json"})
	gauge := func() string {
		t.Helper()
		resp, err := http.Get(p.api + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^vigil_config_last_reload_successful (\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("no vigil_config_last_reload_successful in /metrics")
		}
		return string(m[1])
	}
	if g := gauge(); g != "1" {
		t.Fatalf("reload gauge %s after a good start, want 1", g)
	}
	reloadCmd := func(token string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run([]string{"reload", "-address", p.api, "-token", token}, &out, &errOut)
		return code, out.String(), errOut.String()
	}

	t.Run("SIGHUP with an invalid file drops the gauge", func(t *testing.T) {
		write(bad)
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the refusal in the log", 15*time.Second, func() bool {
			return strings.Contains(p.logText(), "configuration not reloaded")
		})
		if g := gauge(); g != "0" {
			t.Errorf("reload gauge %s after a refused SIGHUP reload, want 0", g)
		}
	})
	t.Run("vigil reload applies a good file", func(t *testing.T) {
		write(good)
		code, out, errOut := reloadCmd("e2e-token")
		if code != 0 || !strings.HasPrefix(out, "reloaded") || !strings.Contains(out, "applied: sources and sites (1 sources, 1 sites)") {
			t.Fatalf("vigil reload = %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		if g := gauge(); g != "1" {
			t.Errorf("reload gauge %s after a good reload, want 1", g)
		}
	})
	t.Run("vigil reload refuses an invalid file with its diagnostics", func(t *testing.T) {
		write(bad)
		code, out, errOut := reloadCmd("e2e-token")
		if code != 1 || !strings.Contains(errOut, "Invalid failback") || !strings.Contains(errOut, "vigil.hcl line 15") || !strings.Contains(errOut, "not reloaded") {
			t.Fatalf("vigil reload = %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		if g := gauge(); g != "0" {
			t.Errorf("reload gauge %s after a refused reload, want 0", g)
		}
		if n := len(p.site(t, "www")["origins"].(map[string]any)); n != 2 {
			t.Errorf("%d origins after a refused reload, want the old 2", n)
		}
	})
	t.Run("vigil reload needs the operator's token", func(t *testing.T) {
		write(good)
		code, _, errOut := reloadCmd("not-the-token")
		if code != 1 || !strings.Contains(errOut, "token") {
			t.Fatalf("vigil reload with a wrong token = %d, stderr:\n%s", code, errOut)
		}
		if g := gauge(); g != "0" {
			t.Errorf("a refused request changed the reload gauge to %s", g)
		}
	})
	t.Run("events -n prints the last N", func(t *testing.T) {
		waitFor(t, "the failover to level 2", 15*time.Second, func() bool {
			return p.site(t, "www")["level"] == float64(2)
		})
		events := func(args ...string) []string {
			var out, errOut bytes.Buffer
			if code := run(append([]string{"events", "-address", p.api, "-token", "e2e-token", "-json"}, args...), &out, &errOut); code != 0 {
				t.Fatalf("vigil events %v = %d: %s", args, code, errOut.String())
			}
			return strings.Split(strings.TrimSpace(out.String()), "\n")
		}
		all := events()
		if len(all) < 3 {
			t.Fatalf("only %d events after a failover:\n%s", len(all), strings.Join(all, "\n"))
		}
		last2 := events("-n", "2")
		if len(last2) != 2 || last2[0] != all[len(all)-2] || last2[1] != all[len(all)-1] {
			t.Errorf("events -n 2 = %q, want the last two of %q", last2, all)
		}
		if more := events("-n", "100000"); len(more) != len(all) {
			t.Errorf("events -n 100000 printed %d events, want all %d", len(more), len(all))
		}
	})
	// Every line the agent wrote is one JSON object: the refused reloads'
	// diagnostics included.
	var diagLines int
	for _, line := range strings.Split(strings.TrimSpace(p.logText()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a line of the -log-json log is not JSON: %q", line)
			continue
		}
		if rec["@message"] == "configuration error" && rec["summary"] == "Invalid failback" {
			diagLines++
			if at, _ := rec["at"].(string); !strings.HasSuffix(at, "vigil.hcl:15:14") {
				t.Errorf("the diagnostic's place is %q, want vigil.hcl:15:14", at)
			}
		}
	}
	if diagLines != 2 {
		t.Errorf("%d JSON diagnostic records, want 2 (one for each refused reload)", diagLines)
	}
}
