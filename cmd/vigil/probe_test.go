package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// TestFailingPluginSeenAndKept: a real plugin process answering gRPC
// status RESOURCE_EXHAUSTED every round (core/pluginhost's testsource,
// for its site "exhausted") is named with its error by vigil probe, with
// -config and through the agent, and by vigil status -problems (exit 1);
// the agent keeps its one process across rounds, restarting nothing.
func TestFailingPluginSeenAndKept(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	dir := t.TempDir()
	plugin := filepath.Join(dir, "vigil-source-quota")
	build := exec.Command("go", "build", "-o", plugin, "github.com/vigilcdn/vigil/core/pluginhost/testdata/testsource")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test plugin: %v\n%s", err, out)
	}
	var addrs []string
	for _, n := range []string{"a1", "a2"} {
		srv := httptest.NewServer(demoorigin.New(n))
		t.Cleanup(srv.Close)
		addrs = append(addrs, srv.URL)
	}
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = "2s"
  data_dir       = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "quota" {
  plugin = %q
  config { voter = "quota-1" }
}
source "direct" { plugin = %q }
site "exhausted" {
  hostname = "www.example.com"
  origin "a1" { address = %q }
  origin "a2" { address = %q }
}
`, filepath.Join(dir, "data"), plugin, filepath.Join(binDir, "vigil-source-direct"), addrs[0], addrs[1])
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	const quota = "plugin error: quota exhausted (ResourceExhausted)"
	vigil := func(args ...string) (int, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		return code, out.String() + errb.String()
	}
	wantProbe := func(t *testing.T, out string) {
		t.Helper()
		for _, want := range []string{"sources that failed this round", "✕ quota", quota, "settled by direct"} {
			if !strings.Contains(out, want) {
				t.Errorf("vigil probe: no %q in:\n%s", want, out)
			}
		}
	}
	t.Run("probe -config", func(t *testing.T) {
		code, out := vigil("probe", "-config", config, "exhausted")
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		wantProbe(t, out)
	})

	p := startAgentProc(t, config)
	t.Setenv("VIGIL_ADDR", p.api)
	t.Setenv("VIGIL_TOKEN", "e2e-token")
	pid := p.pluginPID(t, "quota")
	// The rounds are 2s, so direct has most of a second after quota: on
	// a loaded machine a 135ms share of a 300ms round ran out, and the
	// probe below found direct restarting. It waits for a round direct
	// settled as well.
	waitFor(t, "three failed rounds of the quota source, direct answering", 30*time.Second, func() bool {
		sources, err := p.client().Sources(context.Background())
		return err == nil && len(sources) == 2 && sources[0].FailingRounds >= 3 && sources[1].Name == "direct" && !sources[1].Failing()
	})
	t.Run("one process across rounds", func(t *testing.T) {
		sources, err := p.client().Sources(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		q := sources[0]
		if q.PID != pid || q.Restarts != 0 || q.Crashes != 0 || q.Starts != 1 || !strings.Contains(q.LastError, quota) {
			t.Errorf("quota source = %+v; want pid %d kept, no restart, no crash, its last error", q, pid)
		}
	})
	t.Run("probe through the agent", func(t *testing.T) {
		code, out := vigil("probe", "exhausted")
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		wantProbe(t, out)
	})
	t.Run("status -problems", func(t *testing.T) {
		code, out := vigil("status", "-problems")
		if code != 1 || !strings.Contains(out, "source quota") || !strings.Contains(out, quota) || !strings.Contains(out, "WARNING: 1 vote source failing") {
			t.Errorf("exit %d, want 1 and the failing source:\n%s", code, out)
		}
	})
}

// TestProbeHintsAtClientErrors: an origin some voter found up on a 4xx
// gets the hint that a 4xx counts as up, naming the status and
// expected_status; a 2xx, a 5xx, and a 4xx that expected_status already
// made a down vote get none.
func TestProbeHintsAtClientErrors(t *testing.T) {
	const hint404 = "hint: a1: HTTP 404 counts as up: is the health path right? health_check { expected_status = [200] } makes only the listed statuses count as up."
	for _, tc := range []struct {
		name  string
		votes []api.VoteView
		want  string // "" for no hint
	}{
		{"404 up", []api.VoteView{{Source: "direct", Voter: "direct", Value: "up", Reason: "ok", Detail: "HTTP 404 Not Found"}}, hint404},
		{"410 up from one node of two", []api.VoteView{
			{Source: "node", Voter: "edge-1", Value: "up", Reason: "ok", Detail: "HTTP 200 OK"},
			{Source: "node", Voter: "edge-2", Value: "up", Reason: "ok", Detail: "HTTP 410 Gone"},
		}, "hint: a1: HTTP 410 counts as up"},
		{"404 up from a dnspup checkpoint", []api.VoteView{{Source: "dnspup", Voter: "ams-1", Value: "up", Reason: "ok", Detail: "status 404"}}, hint404},
		{"200 up", []api.VoteView{{Source: "direct", Voter: "direct", Value: "up", Reason: "ok", Detail: "HTTP 200 OK"}}, ""},
		{"503 down", []api.VoteView{{Source: "direct", Voter: "direct", Value: "down", Reason: "http_5xx", Detail: "HTTP 503 Service Unavailable"}}, ""},
		{"404 down by expected_status", []api.VoteView{{Source: "direct", Voter: "direct", Value: "down", Reason: "unexpected_status", Detail: "HTTP 404, expected one of [200]"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			by := "direct"
			res := &api.ProbeResult{Site: "www", Hostname: "www.example.com", Origins: []api.ProbeOrigin{
				{Origin: "a1", Address: "http://127.0.0.1:1", Level: 1, Enabled: true, Verdict: tc.votes[0].Value, By: &by, Asked: []string{"direct"}, Votes: tc.votes},
			}}
			var out bytes.Buffer
			if code := printProbe(&out, res, nil, false); code != 0 {
				t.Fatalf("exit %d", code)
			}
			got := out.String()
			switch {
			case tc.want == "" && strings.Contains(got, "hint:"):
				t.Errorf("a hint where none is due:\n%s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("no %q in:\n%s", tc.want, got)
			}
		})
	}
}

// TestProbeHintsAtA404Origin: the real direct plugin probes a real
// origin on loopback that answers 404 to the health path: vigil probe
// -config shows the vote up with its status, and the hint.
func TestProbeHintsAtA404Origin(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	missing := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(missing.Close)
	fine := httptest.NewServer(demoorigin.New("a2"))
	t.Cleanup(fine.Close)
	dir := t.TempDir()
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control { data_dir = %q }
source "direct" { plugin = %q }
site "www" {
  hostname = "www.example.com"
  health_check { path = "/helth" }
  origin "a1" { address = %q }
  origin "a2" { address = %q }
}
`, filepath.Join(dir, "data"), filepath.Join(binDir, "vigil-source-direct"), missing.URL, fine.URL)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"probe", "-config", config, "www"}, &out, &errb); code != 0 {
		t.Fatalf("vigil probe: exit %d\n%s%s", code, out.String(), errb.String())
	}
	got := out.String()
	for _, want := range []string{"ok: HTTP 404 Not Found", "hint: a1: HTTP 404 counts as up: is the health path right?", "expected_status"} {
		if !strings.Contains(got, want) {
			t.Errorf("vigil probe: no %q in:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "hint:"); n != 1 {
		t.Errorf("vigil probe printed %d hints, want 1 (for a1 only):\n%s", n, got)
	}
}
