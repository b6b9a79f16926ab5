package pluginhost

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// startDebugPlugin starts the testsource by hand in debug mode, as a
// developer would under a debugger, and returns the process and the JSON
// of the reattach line it printed. The process is stopped (SIGINT) at the
// end of the test.
func startDebugPlugin(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(testPlugin)
	cmd.Env = append(os.Environ(), sdk.DebugEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		l, _ := r.ReadString('\n')
		lines <- l
		for { // keep draining: the plugin may print more
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
		}
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(guardFor(10 * time.Second)):
		t.Fatal("the plugin in debug mode printed no reattach line (a hang guard, not a speed bound)")
	}
	value, ok := strings.CutPrefix(strings.TrimSpace(line), sdk.ReattachEnv+"='")
	value, ok2 := strings.CutSuffix(value, "'")
	if !ok || !ok2 {
		t.Fatalf("the plugin printed %q, not %s='JSON'", line, sdk.ReattachEnv)
	}
	return cmd, value
}

// TestReattach starts a plugin by hand in debug mode and has a Source
// attach to it through VIGIL_REATTACH_PLUGINS: its votes come from that
// process, a crash-like answer re-attaches rather than starting the
// binary, and Close leaves the process running.
func TestReattach(t *testing.T) {
	cmd, value := startDebugPlugin(t)
	pid := cmd.Process.Pid
	for _, tc := range []struct {
		name, key, source string
	}{
		{"keyed as printed, by the plugin's name", "testsource", "testsource"},
		{"keyed by the source's name", "mine", "mine"},
		{"keyed by the binary's name", "vigil-source-test", "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(sdk.ReattachEnv, strings.Replace(value, `"testsource"`, fmt.Sprintf("%q", tc.key), 1))
			logs := &sdktest.LogBuffer{}
			src := New(Spec{Name: tc.source, Plugin: testPlugin, Timeout: 20 * time.Second,
				Config: parseConfig(t, `voter = "dbg"`), Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs})})
			t.Cleanup(src.Close)
			if diags := src.Start(context.Background()); diags.HasErrors() {
				t.Fatalf("Start: %v\nlogs:\n%s", diags, logs)
			}
			if got := src.PID(); got != pid {
				t.Errorf("PID() = %d, want the process started by hand, %d", got, pid)
			}
			votes, err := src.Vote(context.Background(), sdk.Ballot{Targets: []sdk.Target{{Site: "pid", Origin: "a", Address: "http://127.0.0.1:1"}}})
			if err != nil {
				t.Fatal(err)
			}
			if len(votes) != 1 || votes[0].Detail != fmt.Sprintf("pid=%d", pid) || votes[0].Voter != "dbg" {
				t.Errorf("votes %+v, want one from pid %d", votes, pid)
			}
			if !strings.Contains(logs.String(), "attached to a plugin started by hand") || !strings.Contains(logs.String(), "neither restart nor stop it") {
				t.Errorf("the log does not say the plugin was attached to:\n%s", logs)
			}
			// UNAVAILABLE is a crash: the source lets the process go and
			// attaches again on its next use; no binary is started.
			if _, err := src.Vote(context.Background(), sdk.Ballot{Targets: []sdk.Target{{Site: "unavailable", Origin: "a", Address: "http://127.0.0.1:1"}}}); err == nil {
				t.Fatal("an UNAVAILABLE answer gave no error")
			}
			votes, err = src.Vote(context.Background(), sdk.Ballot{Targets: []sdk.Target{{Site: "pid", Origin: "a", Address: "http://127.0.0.1:1"}}})
			if err != nil || len(votes) != 1 || votes[0].Detail != fmt.Sprintf("pid=%d", pid) {
				t.Errorf("after the crash-like answer: votes %+v, %v; want one from pid %d", votes, err, pid)
			}
			src.Close()
			if processGone(pid) {
				t.Fatal("closing the source ended the process started by hand")
			}
			if !strings.Contains(logs.String(), "it keeps running") {
				t.Errorf("the log does not say the process was let go:\n%s", logs)
			}
		})
	}

	t.Run("a plugin not named starts as usual", func(t *testing.T) {
		t.Setenv(sdk.ReattachEnv, value)
		src, _ := newSource(t, `voter = "v"`, func(s *Spec) { s.Name = "plain" })
		if got := src.PID(); got == pid || got == 0 {
			t.Errorf("PID() = %d: want a process of its own", got)
		}
	})

	// The plugin ends on SIGINT, with status 0, as a developer's Ctrl-C.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the plugin in debug mode exited with %v after SIGINT, want status 0", err)
		}
	case <-time.After(guardFor(10 * time.Second)):
		t.Fatal("the plugin in debug mode did not end on SIGINT (a hang guard)")
	}
}

func TestReattachErrors(t *testing.T) {
	for _, tc := range []struct{ name, env, want string }{
		{"not JSON", "testsource", "not the JSON a plugin prints"},
		{"a process that is gone", `{"testsource":{"protocol":"grpc","protocol_version":2,"pid":2147483000,"addr":{"network":"unix","string":"/nonexistent/plugin.sock"}}}`, "is it still running?"},
		{"a protocol this host does not speak", `{"testsource":{"protocol":"grpc","protocol_version":9,"pid":1,"addr":{"network":"unix","string":"/nonexistent/plugin.sock"}}}`, "serves vote-source protocol 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(sdk.ReattachEnv, tc.env)
			src := New(Spec{Name: "testsource", Plugin: testPlugin, Config: parseConfig(t, `voter = "v"`)})
			t.Cleanup(src.Close)
			diags := src.Start(context.Background())
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) || !strings.Contains(diags.Error(), sdk.ReattachEnv) {
				t.Errorf("Start: %v, want an error naming %s and saying %q", diags, sdk.ReattachEnv, tc.want)
			}
		})
	}
}
