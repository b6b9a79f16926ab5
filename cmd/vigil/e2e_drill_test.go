package main

import (
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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
	"github.com/vigilcdn/vigil/internal/testnet"
)

// drillEdge is a real vigil-node proxying for the agent, with a bounded
// load of visitor requests through it.
type drillEdge struct {
	id, listen string

	mu     sync.Mutex
	served map[string]int // origin name ("" for an error) → requests
}

func startDrillEdge(t *testing.T, controlPlane, id, dir string) *drillEdge {
	t.Helper()
	e := &drillEdge{id: id, listen: testnet.Addr(t), served: map[string]int{}}
	node := exec.Command(filepath.Join(binDir, "vigil-node"), "-id", id, "-control-plane", controlPlane,
		"-state-dir", filepath.Join(dir, id), "-proxy-listen", e.listen)
	var log bytes.Buffer
	var logMu sync.Mutex
	node.Stderr = writerFunc(func(p []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return log.Write(p) })
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = node.Process.Kill()
		_ = node.Wait()
		if t.Failed() {
			logMu.Lock()
			t.Logf("%s log:\n%s", id, log.String())
			logMu.Unlock()
		}
	})
	return e
}

var drillHTTP = &http.Client{Timeout: 5 * time.Second}

// get sends one visitor request through the edge's proxy and says which
// origin answered ("" for an error).
func (e *drillEdge) get() string {
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+e.listen+"/", nil)
	req.Host = "www.example.com"
	resp, err := drillHTTP.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, n := range []string{"a1", "a2", "b1"} {
		if strings.Contains(string(b), "hello from "+n) {
			return n
		}
	}
	return ""
}

// level is the level the edge's answers come from: 1 (a1, a2), 2 (b1), 0
// for an error.
func (e *drillEdge) level() int {
	switch e.get() {
	case "a1", "a2":
		return 1
	case "b1":
		return 2
	}
	return 0
}

// load sends visitor requests, one at a time with a pause, until ctx ends
// or max were sent: a bounded load on loopback.
func (e *drillEdge) load(ctx context.Context, max int) {
	for i := 0; i < max && ctx.Err() == nil; i++ {
		o := e.get()
		e.mu.Lock()
		e.served[o]++
		e.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (e *drillEdge) counts() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for k, v := range e.served {
		out[k] = v
	}
	return out
}

// drillReceiver is a loopback HTTP server that keeps what the agent's
// notifiers post: the webhook's notices and the Alertmanager API's alerts.
type drillReceiver struct {
	mu      sync.Mutex
	notices []map[string]any
	alerts  []map[string]any
}

func (r *drillReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.URL.Path == "/api/v2/alerts" {
		var as []map[string]any
		if json.Unmarshal(b, &as) == nil {
			r.alerts = append(r.alerts, as...)
		}
	} else {
		var n map[string]any
		if json.Unmarshal(b, &n) == nil {
			r.notices = append(r.notices, n)
		}
	}
	w.WriteHeader(http.StatusOK)
}

// alertLabelled reports whether an alert named name with the label
// drill="true" came.
func (r *drillReceiver) alertLabelled(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.alerts {
		l, _ := a["labels"].(map[string]any)
		if l["alertname"] == name && l["drill"] == "true" {
			return true
		}
	}
	return false
}

// drillNotice is the first notice of kind (and reason, when not empty).
func (r *drillReceiver) notice(kind, reason string) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.notices {
		if n["kind"] == kind && (reason == "" || n["reason"] == reason) {
			return n
		}
	}
	return nil
}

// TestEndToEndDrill: the real agent, its real direct source, three real
// origins on loopback and two real vigil-node proxies under a bounded
// visitor load. A drill run with vigil drill fails the site over (both
// edges serve level 2), its notices say drill and its alerts carry
// drill="true"; its time ends and auto failback brings both edges back to
// level 1; the CLI prints the timeline (and the report when the agent has
// one). An aborted drill ends at once. A real failure of level 2 during a
// drill ends the drill (stepped_aside), and the site comes back by its
// real votes. The journal holds every step, marked.
func TestEndToEndDrill(t *testing.T) {
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
	recv := &drillReceiver{}
	recvSrv := httptest.NewServer(recv)
	t.Cleanup(recvSrv.Close)
	dir := t.TempDir()
	config := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`
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
notify "webhook" "ops" {
  url    = "%s/hook"
  format = "json"
  events = ["level_switched", "drill_started", "drill_ended"]
}
notify "alertmanager" "am" {
  urls            = [%q]
  resend_interval = "1s"
}
site "www" {
  hostname = "www.example.com"
  health_check {
    unhealthy_threshold = 3
    healthy_threshold   = 2
  }
  origin "a1" { address = %q }
  origin "a2" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}`, filepath.Join(dir, "data"), binDir, recvSrv.URL, recvSrv.URL, addr["a1"], addr["a2"], addr["b1"])), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := startAgentProc(t, config)
	edges := []*drillEdge{startDrillEdge(t, agent.api, "edge-1", dir), startDrillEdge(t, agent.api, "edge-2", dir)}
	allOn := func(level int) bool {
		for _, e := range edges {
			if e.level() != level {
				return false
			}
		}
		return true
	}
	siteLevel := func() float64 { l, _ := agent.site(t, "www")["level"].(float64); return l }
	waitFor(t, "both edges to serve level 1, every level healthy", 30*time.Second, func() bool {
		v, err := agent.client().Site(context.Background(), "www")
		return err == nil && v.Levels["1"] == "healthy" && v.Levels["2"] == "healthy" && allOn(1)
	})
	ctx, stopLoad := context.WithCancel(context.Background())
	var loads sync.WaitGroup
	for _, e := range edges {
		loads.Add(1)
		go func() { defer loads.Done(); e.load(ctx, 20000) }()
	}
	t.Cleanup(func() { stopLoad(); loads.Wait() })

	cli := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "vigil"), append(args, "-address", agent.api, "-token", "e2e-token")...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	journal := func(after uint64) []api.EventLine {
		t.Helper()
		evs, err := agent.client().Events(context.Background(), api.EventsQuery{After: after, Site: "www", Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	lastSeq := func() uint64 {
		evs := journal(0)
		if len(evs) == 0 {
			return 0
		}
		return evs[len(evs)-1].Seq
	}
	// site-level lines of the journal after seq: "kind detail [drill]".
	lines := func(after uint64) []string {
		var out []string
		for _, e := range journal(after) {
			switch e.Event.Kind {
			case api.KindDrillStarted, api.KindDrillEnded, api.KindLevelSwitched, api.KindAllLevelsUnhealthy:
				s := e.Event.String()
				if e.Event.Drill {
					s += " [drill]"
				}
				out = append(out, s)
			}
		}
		return out
	}

	t.Run("refusals name the problem", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			code int
			msg  string
		}{
			{[]string{"drill", "nope"}, 1, "no site nope"},
			{[]string{"drill", "-level", "9", "www"}, 1, "site www has no level 9 (its levels are 1, 2)"},
			{[]string{"drill", "-for", "0s", "www"}, 2, "the drill needs a positive duration"},
			{[]string{"drill", "-for", "48h", "www"}, 1, "at most 24h0m0s"},
			{[]string{"drill", "-abort", "www"}, 1, "site www has no drill running"},
		} {
			code, _, stderr := cli(c.args...)
			if code != c.code || !strings.Contains(stderr, c.msg) {
				t.Errorf("vigil %s: exit %d, stderr %q; want %d saying %q", strings.Join(c.args, " "), code, stderr, c.code, c.msg)
			}
		}
	})

	t.Run("time up", func(t *testing.T) {
		before := lastSeq()
		// The drill lasts long enough for the failover and the edges to
		// follow on a slow machine; the CLI follows it to the end.
		cmd := exec.Command(filepath.Join(binDir, "vigil"), "drill", "-for", "20s", "-address", agent.api, "-token", "e2e-token", "www")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		waitFor(t, "the drill's failover, followed by both edges", 20*time.Second, func() bool { return siteLevel() == 2 && allOn(2) })
		if d, err := agent.client().Drill(context.Background(), "www"); err != nil || !d.Running {
			t.Fatalf("the drill while level 2 serves: %+v, %v", d, err)
		}
		waitFor(t, "an Alertmanager alert labelled drill=\"true\"", 20*time.Second, func() bool { return recv.alertLabelled("VigilSiteOnBackupLevel") })
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("vigil drill: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
			}
		case <-time.After(hangGuard(60 * time.Second)):
			t.Fatalf("vigil drill did not return (hang guard)\nstdout:\n%s", out.String())
		}
		t.Logf("vigil drill -for 20s www:\n%s%s", out.String(), errb.String())
		for _, want := range []string{"drill of level 1 (a1, a2) started by", "level 1 -> 2 (failover)", "drill of level 1 ended (time_up)", "level 2 -> 1 (failback)", "Drill of www"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("vigil drill's output lacks %q", want)
			}
		}
		if !strings.Contains(errb.String(), "report is not available from this agent") {
			for _, e := range edges {
				if !strings.Contains(out.String(), "\n  "+e.id+"  ") { // a row of writeFailoverReport's table
					t.Errorf("the report has no row for %s", e.id)
				}
			}
		}
		if siteLevel() != 1 {
			t.Errorf("vigil drill returned with the site on level %v, want 1", siteLevel())
		}
		waitFor(t, "both edges back on level 1", 20*time.Second, func() bool { return allOn(1) })
		got := lines(before)
		want := []string{"drill of level 1 started for 20s", "level 1 -> 2 (failover) [drill]", "drill of level 1 ended (time_up)", "level 2 -> 1 (failback) [drill]"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("journal:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		evs := journal(before)
		if evs[0].Event.Kind != api.KindDrillStarted || !strings.HasSuffix(evs[0].Actor, "(cli)") {
			t.Errorf("drill_started by %q, want the CLI's actor", evs[0].Actor)
		}
		waitFor(t, "the webhook's failover notice, marked as the drill's", 20*time.Second, func() bool {
			n := recv.notice("level_switched", "failover")
			return n != nil && n["drill"] == true && strings.HasPrefix(fmt.Sprint(n["text"]), "Drill: ")
		})
		if recv.notice("drill_started", "") == nil {
			t.Errorf("no drill_started notice")
		}
	})

	t.Run("abort", func(t *testing.T) {
		before := lastSeq()
		if code, _, stderr := cli("drill", "-detach", "-for", "10m", "www"); code != 0 {
			t.Fatalf("vigil drill -detach: exit %d: %s", code, stderr)
		}
		waitFor(t, "the drill's failover", 20*time.Second, func() bool { return siteLevel() == 2 && allOn(2) })
		if code, stdout, stderr := cli("drill", "-abort", "www"); code != 0 || !strings.Contains(stdout, "aborted") {
			t.Fatalf("vigil drill -abort: exit %d: %s%s", code, stdout, stderr)
		}
		waitFor(t, "the return to level 1 after the abort", 20*time.Second, func() bool { return siteLevel() == 1 && allOn(1) })
		got := lines(before)
		want := []string{"drill of level 1 started for 600s", "level 1 -> 2 (failover) [drill]", "drill of level 1 ended (aborted)", "level 2 -> 1 (failback) [drill]"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("journal:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	})

	t.Run("a real failure of level 2 ends the drill", func(t *testing.T) {
		before := lastSeq()
		if code, _, stderr := cli("drill", "-detach", "-for", "10m", "www"); code != 0 {
			t.Fatalf("vigil drill -detach: exit %d: %s", code, stderr)
		}
		waitFor(t, "the drill's failover", 20*time.Second, func() bool { return siteLevel() == 2 && allOn(2) })
		origins["b1"].SetMode(demoorigin.Failing)
		waitFor(t, "the drill to step aside", 20*time.Second, func() bool {
			for _, e := range journal(before) {
				if e.Event.Kind == api.KindDrillEnded && e.Event.End == api.DrillEndSteppedAside {
					return true
				}
			}
			return false
		})
		waitFor(t, "level 1 back by its real votes", 20*time.Second, func() bool { return siteLevel() == 1 && allOn(1) })
		origins["b1"].SetMode(demoorigin.Healthy)
		got := lines(before)
		want := []string{"drill of level 1 started for 600s", "level 1 -> 2 (failover) [drill]", "all levels unhealthy; staying on level 2 [drill]", "drill of level 1 ended (stepped_aside)", "level 2 -> 1 (failback)"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("journal:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	})

	t.Run("history export and replay", func(t *testing.T) {
		// The agent stops (its history flushed), then the recording is
		// exported and replayed under the same configuration.
		_ = agent.cmd.Process.Signal(syscall.SIGTERM)
		<-agent.done
		export := filepath.Join(dir, "drills.jsonl")
		run := func(args ...string) string {
			t.Helper()
			var out bytes.Buffer
			cmd := exec.Command(filepath.Join(binDir, "vigil"), args...)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("vigil %s: %v\n%s", strings.Join(args, " "), err, out.String())
			}
			return out.String()
		}
		run("history", "export", "-config", config, "-o", export)
		b, err := os.ReadFile(export)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"by":"drill"`) {
			t.Errorf("the export names no verdict by the drill")
		}
		out := run("simulate", "-config", config, "-history", export)
		t.Logf("vigil simulate -history:\n%s", out)
		// Rounds of 200 ms share the export's whole seconds, so this
		// replay cannot reproduce the switches (core/simulate's
		// TestReplayDrill does, at whole seconds): it must say it
		// replays the drill's verdicts as the drill's.
		if !strings.Contains(out, "recorded verdicts were a failover drill's (by \"drill\")") {
			t.Errorf("the replay does not say it treats the drill's verdicts as the drill's")
		}
	})

	stopLoad()
	loads.Wait()
	for _, e := range edges {
		c := e.counts()
		t.Logf("%s served: a1 %d, a2 %d, b1 %d, errors %d", e.id, c["a1"], c["a2"], c["b1"], c[""])
		if c["b1"] == 0 || c["a1"]+c["a2"] == 0 {
			t.Errorf("%s's visitors never reached both levels: %v", e.id, c)
		}
	}
}
