package pluginhost

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/host"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

func ballot(site string, n int) sdk.Ballot {
	b := sdk.Ballot{Round: 1, Targets: make([]sdk.Target, n)}
	for i := range b.Targets {
		b.Targets[i] = sdk.Target{
			Site: site, Origin: fmt.Sprintf("o%d", i), Address: "https://203.0.113.10:8443", Host: "www.example.com",
			Path: "/cdn-health", Timeout: 5 * time.Second, UserAgent: "cdnca-control-api/origin-probe",
			Expect: sdk.Expectations{Statuses: []int{200}, BodyContains: "ok", MaxLatency: time.Second},
		}
	}
	return b
}

func TestStartAndVote(t *testing.T) {
	src, _ := newSource(t, `
voter    = "edge-1"
tags     = ["a", "b"]
count    = 3
interval = "1m30s"
enabled  = true
`, nil)
	if info := src.Info(); info.Name != "testsource" || info.Version != "1.2.3" || info.ProtocolVersion != sdk.ProtocolVersion {
		t.Errorf("Info = %+v", info)
	}
	want := map[string]any{"voter": "edge-1", "tags": []string{"a", "b"}, "count": 3.0, "interval": 90 * time.Second, "enabled": true}
	if fmt.Sprint(src.cfg.Values) != fmt.Sprint(want) {
		t.Errorf("decoded config = %v, want %v", src.cfg.Values, want)
	}
	votes, err := src.Vote(context.Background(), ballot("www", 3))
	if err != nil {
		t.Fatal(err)
	}
	if len(votes) != 3 || votes[2].Origin != "o2" || votes[2].Voter != "edge-1" || votes[2].Value != sdk.Up || votes[2].Reason != sdk.ReasonOK {
		t.Errorf("votes = %+v", votes)
	}
	if st := src.Stats(); st.Calls != 1 || st.Failures != 0 || st.Starts != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestConfigDiagnostics(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		summary      string
		pos          string // "line:col" of the diagnostic's subject start
	}{
		{"missing required", `count = 1`, "Missing required argument", ""},
		{"wrong type", "voter = \"v\"\ncount = \"many\"", "Incorrect attribute value type", "2:9"},
		{"unknown attribute", "voter = \"v\"\ncolour = \"red\"", "Unsupported argument", "2:1"},
		{"bad duration", "voter = \"v\"\n\ninterval = \"soon\"", "Invalid duration", "3:12"},
		{"plugin: attribute", "count = 1\nvoter = \"no spaces\"", "Invalid voter id", "2:9"},
		{"plugin: list element", "voter = \"v\"\ntags = [\n  \"ok\",\n  \"bad\",\n]", "Bad tag", "4:3"},
		{"plugin: number", "voter = \"v\"\ncount = 11", "Count too high", "2:9"},
		{"plugin: whole block", "voter = \"v\"\ninterval = \"1s\"\nenabled = false", "interval needs enabled", "9:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blockRange := hcl.Range{Filename: "vigil.hcl", Start: hcl.Pos{Line: 9, Column: 2, Byte: 100}, End: hcl.Pos{Line: 9, Column: 20, Byte: 118}}
			src := New(Spec{Name: "test", Plugin: testPlugin, Config: parseConfig(t, tc.config), Range: blockRange})
			t.Cleanup(src.Close)
			diags := src.Start(context.Background())
			if !diags.HasErrors() {
				t.Fatal("Start succeeded, want a diagnostic")
			}
			d := diags[0]
			if d.Summary != tc.summary {
				t.Errorf("summary = %q (%v), want %q", d.Summary, d, tc.summary)
			}
			if tc.pos != "" {
				if d.Subject == nil {
					t.Fatalf("diagnostic has no subject: %v", d)
				}
				if got := fmt.Sprintf("%d:%d", d.Subject.Start.Line, d.Subject.Start.Column); got != tc.pos {
					t.Errorf("at %s:%s, want %s (%v)", d.Subject.Filename, got, tc.pos, d)
				}
			}
			if src.PID() != 0 {
				t.Errorf("plugin still running after a failed Start")
			}
		})
	}
}

// TestStopOnPurposeIsNotAnError: a plugin that vigil stops itself (here
// after its Configure refused the config) is not logged as an ERROR, though
// go-plugin sees a non-zero exit.
func TestStopOnPurposeIsNotAnError(t *testing.T) {
	logs := &sdktest.LogBuffer{}
	src := New(Spec{Name: "test", Plugin: testPlugin, Config: parseConfig(t, "voter = \"v\"\ncount = 11"),
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs})})
	t.Cleanup(src.Close)
	if diags := src.Start(context.Background()); !diags.HasErrors() {
		t.Fatal("Start succeeded, want the plugin's refusal")
	}
	logs.WaitFor(t, 10*time.Second, "plugin process exited")
	src.Close()
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "[ERROR]") {
			t.Errorf("stopping a plugin on purpose logged an error: %s", line)
		}
	}
}

func TestStartFailures(t *testing.T) {
	sum := sha256.New()
	b, err := os.ReadFile(testPlugin)
	if err != nil {
		t.Fatal(err)
	}
	sum.Write(b)
	good := fmt.Sprintf("sha256:%x", sum.Sum(nil))
	bad := "sha256:" + strings.Repeat("ab", 32)
	notExec := filepath.Join(t.TempDir(), "vigil-source-noexec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec Spec
		want []string // substrings of the diagnostic's detail; none = success
	}{
		{"checksum matches", Spec{Plugin: testPlugin, Checksum: good}, nil},
		{"checksum mismatch", Spec{Plugin: testPlugin, Checksum: bad},
			[]string{testPlugin, "has checksum " + good, "expects " + bad, "refusing to start"}},
		{"checksum malformed", Spec{Plugin: testPlugin, Checksum: "md5:1234"}, []string{`checksum "md5:1234"`, "64 hex digits"}},
		{"missing binary in plugin_dir and PATH", Spec{Plugin: "vigil-source-nonexistent", PluginDir: t.TempDir()},
			[]string{`plugin "vigil-source-nonexistent" not found in plugin_dir`, "nor in PATH"}},
		{"missing binary by path", Spec{Plugin: "/nonexistent/vigil-source-x"}, []string{"/nonexistent/vigil-source-x", "no such file"}},
		{"not executable", Spec{Plugin: notExec}, []string{"not executable"}},
		{"found in plugin_dir", Spec{Plugin: filepath.Base(testPlugin), PluginDir: filepath.Dir(testPlugin)}, nil},
		{"not a plugin", Spec{Plugin: "/bin/true"}, []string{"start plugin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			spec.Name = "test"
			spec.Config = parseConfig(t, `voter = "v"`)
			spec.StartTimeout = 10 * time.Second
			src := New(spec)
			t.Cleanup(src.Close)
			diags := src.Start(context.Background())
			if tc.want == nil {
				if diags.HasErrors() {
					t.Fatalf("Start: %v", diags)
				}
				return
			}
			if !diags.HasErrors() {
				t.Fatal("Start succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(diags[0].Detail, w) {
					t.Errorf("detail %q lacks %q", diags[0].Detail, w)
				}
			}
		})
	}
}

func TestEnvironmentOnlyNamedVariables(t *testing.T) {
	t.Setenv("VIGIL_TEST_PASSED", "yes")
	t.Setenv("VIGIL_TEST_SECRET", "must-not-leak")
	src, _ := newSource(t, `voter = "v"`, func(s *Spec) { s.Env = []string{"VIGIL_TEST_PASSED", "VIGIL_TEST_UNSET"} })
	votes, err := src.Vote(context.Background(), ballot("env", 1))
	if err != nil || len(votes) != 1 {
		t.Fatalf("Vote = %v, %v", votes, err)
	}
	for _, kv := range strings.Split(votes[0].Detail, "\n") {
		name, _, _ := strings.Cut(kv, "=")
		if name != "VIGIL_TEST_PASSED" && !strings.HasPrefix(name, "PLUGIN_") && name != host.Handshake.MagicCookieKey {
			t.Errorf("plugin got host variable %q", name)
		}
	}
	if !strings.Contains(votes[0].Detail, "VIGIL_TEST_PASSED=yes") {
		t.Errorf("named variable not passed: %q", votes[0].Detail)
	}
}

func TestCrashMidCall(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	src, logs := newSource(t, fmt.Sprintf("voter = \"v\"\nready_file = %q", ready), nil)
	firstPID := src.PID()
	errc := make(chan error, 1)
	go func() {
		_, err := src.Vote(context.Background(), ballot("block", 1))
		errc <- err
	}()
	// The plugin creates the file, then writes its pid: wait for the pid,
	// not for the file.
	var pid int
	waitFor(t, "the plugin to enter Vote", 10*time.Second, func() bool {
		b, err := os.ReadFile(ready)
		pid, _ = strconv.Atoi(string(b))
		return err == nil && pid > 0
	})
	if pid != firstPID {
		t.Fatalf("ready file pid %d, plugin pid %d", pid, firstPID)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "crashed") {
			t.Errorf("Vote error = %v, want a crash", err)
		}
	case <-time.After(guardFor(15 * time.Second)):
		t.Fatal("Vote did not return after the plugin was killed")
	}
	st := src.Stats()
	if st.Crashes != 1 || st.Failures != 1 {
		t.Errorf("stats after crash = %+v", st)
	}
	// A process that dies by itself is an error in the log (the host says
	// so; go-plugin's own exit line may come after the host has already
	// dropped the process, and is then Info).
	logs.WaitFor(t, 10*time.Second, "[ERROR]", "vote source crashed")
	// The next use restarts the plugin and votes normally.
	votes, err := src.Vote(context.Background(), ballot("www", 2))
	if err != nil || len(votes) != 2 {
		t.Fatalf("Vote after restart = %v, %v", votes, err)
	}
	if st := src.Stats(); st.Restarts != 1 || st.Starts != 2 {
		t.Errorf("stats after restart = %+v", st)
	}
	if src.PID() == firstPID || !processGone(firstPID) {
		t.Errorf("old plugin %d not replaced", firstPID)
	}
}

func TestExitBetweenCalls(t *testing.T) {
	src, _ := newSource(t, `voter = "v"`, nil)
	pid := src.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the host to notice the exit", 10*time.Second, func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.proc.client.Exited()
	})
	votes, err := src.Vote(context.Background(), ballot("www", 1))
	if err != nil || len(votes) != 1 {
		t.Fatalf("Vote = %v, %v", votes, err)
	}
	if st := src.Stats(); st.Crashes != 1 || st.Restarts != 1 || st.Failures != 0 {
		t.Errorf("stats = %+v", st)
	}
}

// TestHangPastDeadline: a call past its deadline returns at the deadline.
// A plugin late once is kept (slow, not hung): the next round asks the
// same process; late twice in a row it is killed and restarted.
func TestHangPastDeadline(t *testing.T) {
	for _, mode := range []string{"hang", "block", "exit"} {
		t.Run(mode, func(t *testing.T) {
			src, _ := newSource(t, `voter = "v"`, func(s *Spec) { s.Timeout = 3 * time.Second })
			pid := src.PID()
			start := time.Now()
			_, err := src.Vote(context.Background(), ballot(mode, 1))
			if err == nil {
				t.Fatal("Vote succeeded")
			}
			// hang and block never answer: that Vote returned at all is
			// the deadline at work (how long it took is no test's business
			// on a loaded machine).
			t.Logf("Vote returned after %v with a 3s deadline", time.Since(start).Round(time.Millisecond))
			st := src.Stats()
			if mode == "exit" {
				if st.Crashes != 1 {
					t.Errorf("stats = %+v, want a crash", st)
				}
				waitFor(t, "the exited plugin to be gone", 10*time.Second, func() bool { return processGone(pid) })
				waitFor(t, "the restarted plugin to vote", 30*time.Second, func() bool {
					_, err := src.Vote(context.Background(), ballot("www", 1))
					return err == nil
				})
				return
			}
			if st.Timeouts != 1 || st.Restarts != 0 || !strings.Contains(err.Error(), "no answer within 3s: the plugin is kept") {
				t.Fatalf("err = %v, stats = %+v, want a timeout that keeps the plugin", err, st)
			}
			second := "second call in a row: the plugin was killed"
			if mode == "block" {
				// Late once, and it gave up at the deadline: the same
				// process answers the next round...
				if _, err := src.Vote(context.Background(), ballot("www", 1)); err != nil || src.PID() != pid {
					t.Fatalf("the round after one timeout: %v, pid %d (was %d); want the same process to vote", err, src.PID(), pid)
				}
				// ... and late twice in a row, it is killed.
				if _, err := src.Vote(context.Background(), ballot(mode, 1)); err == nil || !strings.Contains(err.Error(), "the plugin is kept") {
					t.Fatalf("err = %v, want a timeout that keeps the plugin", err)
				}
				if _, err := src.Vote(context.Background(), ballot(mode, 1)); err == nil || !strings.Contains(err.Error(), second) {
					t.Fatalf("err = %v, want the second timeout in a row to kill the plugin", err)
				}
			} else {
				// hang ignores the deadline and holds the plugin: the
				// next ballot times out too, and the plugin is killed.
				if _, err := src.Vote(context.Background(), ballot("www", 1)); err == nil || !strings.Contains(err.Error(), second) {
					t.Fatalf("err = %v, want the second timeout in a row to kill the plugin", err)
				}
			}
			waitFor(t, "the hung plugin to be gone", 10*time.Second, func() bool { return processGone(pid) })
			// The restart runs in the background; on a loaded machine it
			// may outlast one call's deadline.
			waitFor(t, "the restarted plugin to vote", 30*time.Second, func() bool {
				_, err := src.Vote(context.Background(), ballot("www", 1))
				return err == nil
			})
			if src.PID() == pid {
				t.Errorf("the plugin late twice in a row was not replaced (pid %d)", pid)
			}
		})
	}
}

func TestPluginErrorKeepsProcess(t *testing.T) {
	src, _ := newSource(t, `voter = "v"`, nil)
	pid := src.PID()
	_, err := src.Vote(context.Background(), ballot("error", 1))
	if err == nil || !strings.Contains(err.Error(), "upstream API said no") {
		t.Fatalf("err = %v", err)
	}
	if st := src.Stats(); st.PluginErrors != 1 || st.Failures != 1 || st.Restarts != 0 {
		t.Errorf("stats = %+v", st)
	}
	if src.PID() != pid {
		t.Error("plugin was restarted after a plain error")
	}
}

// TestStatusCodes holds the documented meaning of a failed Vote
// (sdk/PROTOCOL.md, section 4): Unavailable or a dead process is a crash
// and restarts the plugin; any other status is that round's error, with
// its message, and the same process answers the next round.
func TestStatusCodes(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		wantErr string
		crash   bool
	}{
		{mode: "error", wantErr: `plugin error: upstream API said no`},
		{mode: "exhausted", wantErr: `plugin error: quota exhausted (ResourceExhausted)`},
		{mode: "unavailable", wantErr: "plugin crashed", crash: true},
		{mode: "exit", wantErr: "plugin crashed", crash: true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			src, _ := newSource(t, `voter = "v"`, nil)
			pid := src.PID()
			rounds := 3
			if tc.crash {
				rounds = 1 // the next restarts wait for the backoff
			}
			for round := range rounds {
				_, err := src.Vote(context.Background(), ballot(tc.mode, 1))
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("round %d: err = %v, want %q", round+1, err, tc.wantErr)
				}
			}
			votes, err := src.Vote(context.Background(), ballot("www", 1))
			if err != nil || len(votes) != 1 {
				t.Fatalf("Vote after the failures = %v, %v", votes, err)
			}
			st := src.Stats()
			if tc.crash {
				if st.Crashes != 1 || st.Restarts != 1 || st.PluginErrors != 0 {
					t.Errorf("stats = %+v, want one crash and one restart", st)
				}
				if src.PID() == pid {
					t.Errorf("plugin %d was not replaced after a crash", pid)
				}
				return
			}
			if st.PluginErrors != uint64(rounds) || st.Failures != uint64(rounds) || st.Crashes != 0 || st.Restarts != 0 || st.Starts != 1 {
				t.Errorf("stats = %+v, want %d plugin errors and no restart", st, rounds)
			}
			if src.PID() != pid {
				t.Errorf("plugin pid %d became %d: restarted after a status that is not a crash", pid, src.PID())
			}
		})
	}
}

func TestGarbageVotes(t *testing.T) {
	src, logs := newSource(t, `voter = "v"`, nil)
	votes, err := src.Vote(context.Background(), ballot("garbage", 1))
	if err != nil {
		t.Fatal(err)
	}
	want := sdk.Vote{Site: "garbage", Origin: "o0", Voter: "v", Value: sdk.Down, Reason: sdk.ReasonUnspecified}
	if len(votes) != 1 || votes[0] != want {
		t.Errorf("kept %+v, want only %+v", votes, want)
	}
	if st := src.Stats(); st.DroppedVotes != 7 || st.Failures != 0 {
		t.Errorf("stats = %+v", st)
	}
	if !strings.Contains(logs.String(), "dropped garbage votes") {
		t.Errorf("garbage not logged:\n%s", logs)
	}
}

func TestLargeBallot(t *testing.T) {
	src, _ := newSource(t, `voter = "v"`, nil)
	b := ballot("big", 10000)
	votes, err := src.Vote(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if len(votes) != 10000 || votes[9999].Origin != "o9999" {
		t.Errorf("got %d votes", len(votes))
	}
}

func TestPluginLogsReemitted(t *testing.T) {
	src, logs := newSource(t, `voter = "v"`, nil)
	if _, err := src.Vote(context.Background(), ballot("www", 4)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the plugin's log line", 10*time.Second, func() bool {
		s := logs.String()
		return strings.Contains(s, "vote: source=test") && strings.Contains(s, "targets=4")
	})
}

func TestBackoff(t *testing.T) {
	s := New(Spec{MinBackoff: time.Second, MaxBackoff: 10 * time.Second})
	for streak, want := range []time.Duration{0, 0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
		s.failStreak = streak
		if got := s.backoff(); got != want {
			t.Errorf("backoff after %d failures = %v, want %v", streak, got, want)
		}
	}
}

func TestBackoffSkipsCallsWhileWaiting(t *testing.T) {
	// A deadline far above need: on a loaded machine a restart and a vote
	// within 1s could time out, which is no crash and starts no backoff.
	src, _ := newSource(t, `voter = "v"`, func(s *Spec) { s.Timeout = 20 * time.Second; s.MinBackoff = time.Hour })
	for range 2 {
		if _, err := src.Vote(context.Background(), ballot("exit", 1)); err == nil {
			t.Fatal("Vote succeeded")
		}
	}
	_, err := src.Vote(context.Background(), ballot("www", 1))
	if err == nil || !strings.Contains(err.Error(), "next restart in") {
		t.Fatalf("err = %v, want a backoff refusal", err)
	}
	if st := src.Stats(); st.Crashes != 2 || st.Restarts != 1 || st.Failures != 3 {
		t.Errorf("stats = %+v", st)
	}
}

func TestCloseStopsPlugin(t *testing.T) {
	src, _ := newSource(t, `voter = "v"`, nil)
	pid := src.PID()
	src.Close()
	waitFor(t, "the plugin to exit", 10*time.Second, func() bool { return processGone(pid) })
	if _, err := src.Vote(context.Background(), ballot("www", 1)); err == nil {
		t.Error("Vote after Close succeeded")
	}
}

func TestNoOrphanAfterHostSIGKILL(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+testPlugin)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil || pid <= 0 {
		t.Fatalf("helper host printed no plugin pid: %v", err)
	}
	if processGone(pid) {
		t.Fatalf("plugin %d not running", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitFor(t, fmt.Sprintf("plugin %d to die with its host", pid), 10*time.Second, func() bool { return processGone(pid) })
}

// TestHungRestartCostsOnlyTheDeadline: a plugin whose restart hangs in its
// handshake holds no Vote past the source's deadline, nor Close, and the
// source votes again once the plugin starts normally.
func TestHungRestartCostsOnlyTheDeadline(t *testing.T) {
	hang := filepath.Join(t.TempDir(), "hang")
	t.Setenv("VIGIL_TEST_HANG_START", hang)
	src, logs := newSource(t, `voter = "v"`, func(s *Spec) {
		s.Timeout = time.Second
		s.StartTimeout = 3 * time.Second
		s.MinBackoff, s.MaxBackoff = 100*time.Millisecond, 200*time.Millisecond
		s.Env = []string{"VIGIL_TEST_HANG_START"}
	})
	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	killAndWaitExited(t, src)
	// Each vote gives up at its own 1s deadline, saying the start goes on,
	// rather than waiting for the start's 3s (whose error would be the
	// start's): the error tells which, whatever the machine's speed.
	for i := range 3 {
		start := time.Now()
		_, err := src.Vote(context.Background(), ballot("www", 1))
		if err == nil {
			t.Fatalf("vote %d succeeded while the restart hangs", i)
		}
		if !strings.Contains(err.Error(), "was not ready by the deadline; its start goes on in the background") {
			t.Fatalf("vote %d while the restart hangs: %v; want the vote's own deadline, the start going on", i, err)
		}
		t.Logf("vote %d returned after %v with a 1s deadline", i, time.Since(start).Round(time.Millisecond))
	}
	closed := make(chan struct{})
	go func() { src.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(guardFor(time.Second)):
		t.Fatal("Close did not return while a restart hangs")
	}
	if !strings.Contains(logs.String(), "did not finish its start within 3s") {
		waitFor(t, "the hung start to be reported", 10*time.Second, func() bool {
			return strings.Contains(logs.String(), "did not finish its start within 3s")
		})
	}
}

// TestRestartAfterHangRecovers: once the plugin starts normally again, the
// source votes.
func TestRestartAfterHangRecovers(t *testing.T) {
	hang := filepath.Join(t.TempDir(), "hang")
	t.Setenv("VIGIL_TEST_HANG_START", hang)
	src, _ := newSource(t, `voter = "v"`, func(s *Spec) {
		s.Timeout = time.Second
		s.StartTimeout = 2 * time.Second
		s.MinBackoff, s.MaxBackoff = 100*time.Millisecond, 200*time.Millisecond
		s.Env = []string{"VIGIL_TEST_HANG_START"}
	})
	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	killAndWaitExited(t, src)
	start := time.Now()
	if _, err := src.Vote(context.Background(), ballot("www", 1)); err == nil || !strings.Contains(err.Error(), "restarting") {
		t.Fatalf("vote while the restart hangs: %v, want a restart not ready by the deadline", err)
	}
	// It waited for its deadline (a lower bound, which load cannot break);
	// the error above says it did not wait for the start's.
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("the vote waited %v for the hung restart; want its 1s deadline", took)
	}
	if err := os.Remove(hang); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the source to vote again", 20*time.Second, func() bool {
		votes, err := src.Vote(context.Background(), ballot("www", 1))
		return err == nil && len(votes) == 1
	})
	if st := src.Stats(); st.StartFailures < 1 || st.Restarts < 2 {
		t.Errorf("stats %+v: want the hung start counted as a failed restart and a later restart", st)
	}
}

// killAndWaitExited kills the running plugin and waits until the host has
// noticed.
func killAndWaitExited(t *testing.T, src *Source) {
	t.Helper()
	pid := src.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the host to notice the plugin's exit", 10*time.Second, func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.proc == nil || src.proc.client.Exited()
	})
}
