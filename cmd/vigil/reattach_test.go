package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/sdk"
)

// TestReattachEndToEnd is the plugin author's debugging loop: the test
// plugin is started by hand in debug mode (VIGIL_PLUGIN_DEBUG=1, as under
// dlv), and the line it prints is exported as VIGIL_REATTACH_PLUGINS. The
// configuration names a plugin binary that does not exist, so every vote
// below can only come from that process: vigil validate passes, vigil
// probe -config shows votes carrying its PID, and a real agent reports it
// as the source's process and probes through it.
func TestReattachEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "vigil-source-test")
	if out, err := exec.Command("go", "build", "-o", bin, "../../core/pluginhost/testdata/testsource").CombinedOutput(); err != nil {
		t.Fatalf("build the test plugin: %v\n%s", err, out)
	}
	plug := exec.Command(bin)
	plug.Env = append(os.Environ(), sdk.DebugEnv+"=1")
	var plugErr bytes.Buffer
	plug.Stderr = &plugErr
	stdout, err := plug.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := plug.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plug.Process.Kill(); _ = plug.Wait() })
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		l, _ := r.ReadString('\n')
		lines <- l
		_, _ = r.WriteTo(io.Discard) // what it prints after the line
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(2 * time.Minute): // a hang guard only
		t.Fatal("the plugin in debug mode printed no reattach line")
	}
	value, ok := strings.CutPrefix(strings.TrimSpace(line), sdk.ReattachEnv+"='")
	value, ok2 := strings.CutSuffix(value, "'")
	if !ok || !ok2 {
		t.Fatalf("the plugin printed %q, not %s='JSON'", line, sdk.ReattachEnv)
	}
	// The plugin names itself "testsource"; the configuration's binary is
	// "vigil-source-absent": the developer edits the key to it.
	value = strings.Replace(value, `"testsource"`, `"vigil-source-absent"`, 1)
	pid := plug.Process.Pid

	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(origin.Close)
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`control {
  round_interval = "30s" # the first round runs at the start; the test asks no other
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "dbg" {
  plugin = "vigil-source-absent"
  config { voter = "dbg" }
}
site "pid" {
  hostname = "example.com"
  origin "a" { address = %q }
  origin "b" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), dir, origin.URL, origin.URL)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	vigil := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	t.Setenv("VIGIL_TOKEN", "e2e-token")

	t.Run("without the variable the binary is missing", func(t *testing.T) {
		if code, out, errb := vigil("validate", config); code == 0 || !strings.Contains(out+errb, "vigil-source-absent") {
			t.Errorf("vigil validate without %s: exit %d, want a failure naming the missing binary:\n%s%s", sdk.ReattachEnv, code, out, errb)
		}
	})
	t.Setenv(sdk.ReattachEnv, value)
	t.Run("validate attaches", func(t *testing.T) {
		code, out, errb := vigil("validate", config)
		if code != 0 {
			t.Errorf("vigil validate: exit %d:\n%s%s", code, out, errb)
		}
		if want := fmt.Sprintf("vigil attaches to that process (pid %d)", pid); !strings.Contains(out+errb, want) {
			t.Errorf("vigil validate does not warn %q:\n%s%s", want, out, errb)
		}
	})
	wantVote := func(t *testing.T, res api.ProbeResult) {
		t.Helper()
		if len(res.Origins) != 2 {
			t.Fatalf("probe: %+v, want two origins", res)
		}
		for _, o := range res.Origins {
			if len(o.Votes) != 1 {
				t.Fatalf("origin %s: votes %+v, want one", o.Origin, o.Votes)
			}
			if v := o.Votes[0]; v.Source != "dbg" || v.Voter != "dbg" || v.Detail != fmt.Sprintf("pid=%d", pid) {
				t.Errorf("origin %s: vote %+v, want one from source dbg with detail pid=%d (the process started by hand)", o.Origin, v, pid)
			}
		}
	}
	t.Run("probe -config attaches", func(t *testing.T) {
		code, out, errb := vigil("probe", "-config", config, "pid", "-json")
		if code != 0 {
			t.Fatalf("vigil probe: exit %d:\n%s%s", code, out, errb)
		}
		var res api.ProbeResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("probe -json: %v\n%s", err, out)
		}
		wantVote(t, res)
	})
	t.Run("the agent attaches", func(t *testing.T) {
		p := startAgentProc(t, config) // inherits the variable
		c := p.client()
		var sources []api.SourceInfo
		waitFor(t, "the source running", 30*time.Second, func() bool {
			sources, err = c.Sources(context.Background())
			return err == nil && len(sources) == 1 && sources[0].PID != 0
		})
		if sources[0].PID != pid {
			t.Errorf("GET /v1/sources: the source's PID is %d, want %d, the process started by hand", sources[0].PID, pid)
		}
		res, err := c.Probe(context.Background(), "pid")
		if err != nil {
			t.Fatal(err)
		}
		wantVote(t, *res)
		if log := p.logText(); !strings.Contains(log, "attached to a plugin started by hand") {
			t.Errorf("the agent's log does not say it attached:\n%s", log)
		}
	})
	if processGone(pid) {
		t.Errorf("the plugin started by hand is gone after validate, probe and an agent used it:\n%s", plugErr.String())
	}
}
