package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/internal/testnet"
)

// TestEndToEndFailoverReport: a real agent with the node gateway, two
// real vigil-nodes proxying visitor GETs at a bounded rate (one every
// 50 ms over both), and two driving a template edge, whose reload works
// for one and fails for the other. Level 1's only origin dies; once the site failed
// over, the journal's failover_timed event and GET
// /v1/sites/www/failovers carry the same report, whose times agree with
// the journal (the level_switched event's seq, round and time, a1's
// origin_state event), come in order, and whose durations are the
// differences of its times; each node's apply time is there, after the
// publication (or its edge's error), the proxying ones with their last
// request to level 1 (before their apply) and their visitors' errors.
// No wall-clock bound is asserted.
func TestEndToEndFailoverReport(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test runs the real binaries")
	}
	var dead atomic.Bool
	a1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if dead.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "a1")
	}))
	t.Cleanup(a1.Close)
	b1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "b1") }))
	t.Cleanup(b1.Close)

	dir := t.TempDir()
	gateway := testnet.Addr(t)
	cfg := fmt.Sprintf(`
control {
  round_interval = "500ms"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 1
  timeout   = "3s"
  env       = ["VIGIL_NODE_TOKEN"]
  config {
    listen          = %q
    token_env       = "VIGIL_NODE_TOKEN"
    online_timeout  = "3s"
    nodes_per_round = 1
  }
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
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), binDir, gateway, a1.URL, b1.URL)
	config := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIGIL_NODE_TOKEN", "node-secret")
	agent := startAgentProc(t, config)
	c := agent.client()

	// Two proxying nodes, and two that drive a template edge (a real
	// reload command): one whose reload works, one whose reload fails.
	tmpl := filepath.Join(dir, "edge.tmpl")
	if err := os.WriteFile(tmpl, []byte("{{range .Sites}}{{.Name}} level {{.Level}}\n{{end}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	rendered := map[string]string{"edge-tmpl": filepath.Join(dir, "edge-tmpl.conf"), "edge-broken": filepath.Join(dir, "edge-broken.conf")}
	var proxies []string
	for _, id := range []string{"edge-1", "edge-2", "edge-broken", "edge-tmpl"} {
		args := []string{"-id", id, "-control-plane", agent.api, "-control-plane-token-env", "VIGIL_TOKEN"}
		switch id {
		case "edge-tmpl":
			args = append(args, "-template", tmpl+":"+rendered[id], "-template-reload", "true")
		case "edge-broken":
			args = append(args, "-template", tmpl+":"+rendered[id], "-template-reload", "echo the edge refused it >&2; exit 1")
		default:
			listen := testnet.Addr(t)
			proxies = append(proxies, "http://"+listen)
			args = append(args, "-gateway", gateway, "-token-env", "VIGIL_NODE_TOKEN", "-proxy-listen", listen)
		}
		cmd := exec.Command(filepath.Join(binDir, "vigil-node"), args...)
		cmd.Env = append(os.Environ(), "VIGIL_NODE_TOKEN=node-secret", "VIGIL_TOKEN=e2e-token")
		log := &syncBuffer{}
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if strings.Contains(log.String(), "WARNING: DATA RACE") {
				t.Errorf("the race detector found a data race in %s", id)
			}
			if t.Failed() {
				t.Logf("%s log:\n%s", id, log.String())
			}
		})
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	t.Cleanup(client.CloseIdleConnections)
	get := func(base string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+"/page", nil)
		req.Host = "www.example.com"
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, "level 1 healthy, both proxies serving it, both templates rendered", 30*time.Second, func() bool {
		if agent.site(t, "www")["levels"].(map[string]any)["1"] != "healthy" {
			return false
		}
		for _, f := range rendered {
			if b, err := os.ReadFile(f); err != nil || !strings.Contains(string(b), "www level 1") {
				return false
			}
		}
		for _, p := range proxies {
			if code, body := get(p); code != 200 || body != "a1" {
				return false
			}
		}
		return true
	})

	// Visitors: a GET every 50 ms, alternately through each proxy.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			get(proxies[i%len(proxies)])
		}
	})

	dead.Store(true)
	var journal []api.EventLine
	waitFor(t, "the failover's report journaled", 30*time.Second, func() bool {
		evs, err := c.Events(context.Background(), api.EventsQuery{Site: "www", Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		journal = evs
		for _, e := range evs {
			if e.Event.Kind == api.KindFailoverTimed {
				return true
			}
		}
		return false
	})
	stop()
	wg.Wait()

	var switched, timed, a1Down *api.EventLine
	for i := range journal {
		e := &journal[i]
		switch {
		case e.Event.Kind == api.KindLevelSwitched && e.Event.Reason == api.ReasonFailover && switched == nil:
			switched = e
		case e.Event.Kind == api.KindFailoverTimed && timed == nil:
			timed = e
		case e.Event.Kind == api.KindOriginState && e.Event.Origin == "a1" && e.Event.To == api.OriginUnhealthy && a1Down == nil:
			a1Down = e
		}
	}
	if switched == nil || a1Down == nil {
		t.Fatalf("the journal lacks the failover or a1's fall: %+v", journal)
	}
	list, err := c.Failovers(context.Background(), "www", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Failovers) != 1 {
		t.Fatalf("%d reports, want 1: %+v", len(list.Failovers), list.Failovers)
	}
	rep := list.Failovers[0]
	var text bytes.Buffer
	writeFailoverReport(&text, &rep)
	t.Logf("the report:\n%s", text.String())

	// The journal keeps the very report the API serves.
	if !reflect.DeepEqual(*timed.Event.Failover, rep) {
		t.Errorf("journaled report %+v\nAPI report %+v", *timed.Event.Failover, rep)
	}
	if timed.Seq <= switched.Seq {
		t.Errorf("failover_timed (seq %d) journaled before the switch (seq %d)", timed.Seq, switched.Seq)
	}
	// It agrees with the journal's switch and with a1's fall.
	ms := func(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
	if !rep.Complete || rep.Drill || rep.Site != "www" || rep.FromLevel != 1 || rep.ToLevel != 2 || rep.Origin != "a1" {
		t.Errorf("report head: %+v", rep)
	}
	if rep.Seq != switched.Seq || rep.Round != switched.Round || !rep.RoundStarted.Equal(ms(switched.Time)) {
		t.Errorf("report seq %d round %d round_started %s; the journal's switch: seq %d round %d time %s",
			rep.Seq, rep.Round, rep.RoundStarted, switched.Seq, switched.Round, switched.Time)
	}
	if rep.FirstFailure == nil || rep.Committed == nil || rep.Published == nil {
		t.Fatalf("a step is missing: %+v", rep)
	}
	// In order: a1's first failed round, its fall, the deciding round,
	// the decision, the commit, the publication.
	steps := []struct {
		name string
		at   time.Time
	}{
		{"first failed verdict", rep.FirstFailure.Time},
		{"a1 unhealthy (journal)", ms(a1Down.Time)},
		{"the switch's round (journal)", ms(switched.Time)},
		{"decided", rep.Decided.Time},
		{"committed", rep.Committed.Time},
		{"published", rep.Published.Time},
	}
	for i := 1; i < len(steps); i++ {
		if steps[i].at.Before(steps[i-1].at) {
			t.Errorf("%s (%s) before %s (%s)", steps[i].name, steps[i].at, steps[i-1].name, steps[i-1].at)
		}
	}
	if a1Down.Round >= rep.Round && a1Down.Round != rep.Round {
		t.Errorf("a1 fell in round %d, after the switch's round %d", a1Down.Round, rep.Round)
	}
	// Each duration is the difference of the times as written.
	secs := func(a, b time.Time) float64 { return float64(b.Sub(a).Milliseconds()) / 1000 }
	agree := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || *got != want {
			t.Errorf("%s = %v, want %v (from the report's times)", name, got, want)
		}
	}
	agree("detect_seconds", rep.DetectSeconds, secs(rep.FirstFailure.Time, rep.Decided.Time))
	agree("commit_seconds", rep.CommitSeconds, secs(rep.Decided.Time, rep.Committed.Time))
	agree("publish_seconds", rep.PublishSeconds, secs(rep.Decided.Time, rep.Published.Time))

	// Every node applied it after the publication (or says its edge
	// refused it); the proxying ones say what their proxy saw of level 1.
	names := []string{"edge-1", "edge-2", "edge-broken", "edge-tmpl"}
	if len(rep.Nodes) != len(names) {
		t.Fatalf("rows %+v, want one per node %v", rep.Nodes, names)
	}
	errs := 0
	var last time.Time
	for i, n := range rep.Nodes {
		if n.Node != names[i] || !n.Reported || n.Applied == nil {
			t.Errorf("row %+v, want %s's report", n, names[i])
			continue
		}
		if n.Version < rep.Publication {
			t.Errorf("%s applied version %d, before the switch's %d", n.Node, n.Version, rep.Publication)
		}
		if n.Applied.Before(rep.Published.Time) {
			t.Errorf("%s applied at %s, before the publication at %s", n.Node, n.Applied, rep.Published)
		}
		agree(n.Node+" edge_seconds", n.EdgeSeconds, secs(rep.Published.Time, n.Applied.Time))
		switch n.Node {
		case "edge-broken":
			if n.Result == "ok" || !strings.Contains(n.Result, "edge template") {
				t.Errorf("edge-broken's result %q, want its edge's error", n.Result)
			}
			continue
		case "edge-tmpl":
			if n.Result != "ok" || n.Proxying || n.LastRequest != nil || n.VisitorRequests != 0 {
				t.Errorf("edge-tmpl's row %+v: an edge vigil-node does not proxy knows no request", n)
			}
		default:
			if n.Result != "ok" || !n.Proxying {
				t.Errorf("row %+v", n)
			}
			// The proxy may stop sending to a1 before the first failed
			// round (it skips an origin that failed visitors' requests
			// and serves them from the backup level), never after the
			// switch.
			if n.LastRequest == nil || n.LastRequest.After(n.Applied.Time) {
				t.Errorf("%s: last request to level 1 %v, want one before its apply at %s", n.Node, n.LastRequest, n.Applied)
			} else {
				agree(n.Node+" last_request_seconds", n.LastRequestSeconds, secs(rep.FirstFailure.Time, n.LastRequest.Time))
			}
			if n.VisitorErrors > n.VisitorRequests {
				t.Errorf("%s: %d visitor errors of %d requests", n.Node, n.VisitorErrors, n.VisitorRequests)
			}
			errs += n.VisitorErrors
		}
		if n.Applied.After(last) {
			last = n.Applied.Time
		}
	}
	if errs == 0 {
		t.Errorf("no visitor error counted while a1 answered 503 to the proxies: %+v", rep.Nodes)
	}
	if b, err := os.ReadFile(rendered["edge-tmpl"]); err != nil || !strings.Contains(string(b), "www level 2") {
		t.Errorf("edge-tmpl's rendered file: %q %v", b, err)
	}
	agree("edge_seconds", rep.EdgeSeconds, secs(rep.Published.Time, last))
	agree("total_seconds", rep.TotalSeconds, secs(rep.FirstFailure.Time, last))

	// The histograms counted it: one detection, one publication, three
	// edges that took it.
	metrics := agentMetrics(t, agent)
	for series, want := range map[string]string{
		"vigil_failover_detect_seconds_count":  "1",
		"vigil_failover_publish_seconds_count": "1",
		"vigil_failover_edge_seconds_count":    "3",
	} {
		if got := seriesValue(metrics, series); got != want {
			t.Errorf("%s = %q, want %s", series, got, want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a process's stderr copier and
// the test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// agentMetrics reads the agent's /metrics.
func agentMetrics(t *testing.T, p *agentProc) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.api+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer e2e-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// seriesValue is the value of an unlabelled series in a text exposition.
func seriesValue(text, series string) string {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestEndToEndFailoverReportAfterRestart: the agent restarts (same data
// and address) while its nodes run; it publishes the same version, so no
// node has a new one to acknowledge, yet each tells it which version it
// serves, and the first failover after the restart expects and reports
// both nodes: the proxying one and one driving a template edge.
func TestEndToEndFailoverReportAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test runs the real binaries")
	}
	var dead atomic.Bool
	a1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if dead.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "a1")
	}))
	t.Cleanup(a1.Close)
	b1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "b1") }))
	t.Cleanup(b1.Close)

	dir := t.TempDir()
	gateway, listen := testnet.Addr(t), testnet.Addr(t)
	cfg := fmt.Sprintf(`
control {
  round_interval = "500ms"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = %q
    token_env = "VIGIL_TOKEN"
  }
}
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 1
  timeout   = "400ms"
  env       = ["VIGIL_NODE_TOKEN"]
  config {
    listen          = %q
    token_env       = "VIGIL_NODE_TOKEN"
    online_timeout  = "3s"
    nodes_per_round = 1
  }
}
site "www" {
  hostname = "www.example.com"
  health_check {
    path                = "/cdn-health"
    timeout             = "300ms"
    unhealthy_threshold = 3
    healthy_threshold   = 2
  }
  origin "a1" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), binDir, listen, gateway, a1.URL, b1.URL)
	config := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join(dir, "edge.tmpl")
	if err := os.WriteFile(tmpl, []byte("{{range .Sites}}{{.Name}} level {{.Level}}\n{{end}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIGIL_NODE_TOKEN", "node-secret")
	agent := startAgentProc(t, config)

	for _, id := range []string{"edge-1", "edge-tmpl"} {
		args := []string{"-id", id, "-control-plane", agent.api, "-control-plane-token-env", "VIGIL_TOKEN"}
		if id == "edge-tmpl" {
			args = append(args, "-template", tmpl+":"+filepath.Join(dir, "edge.conf"), "-template-reload", "true")
		} else {
			args = append(args, "-gateway", gateway, "-token-env", "VIGIL_NODE_TOKEN", "-proxy-listen", testnet.Addr(t))
		}
		cmd := exec.Command(filepath.Join(binDir, "vigil-node"), args...)
		cmd.Env = append(os.Environ(), "VIGIL_NODE_TOKEN=node-secret", "VIGIL_TOKEN=e2e-token")
		log := &syncBuffer{}
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if strings.Contains(log.String(), "WARNING: DATA RACE") {
				t.Errorf("the race detector found a data race in %s", id)
			}
			if t.Failed() {
				t.Logf("%s log:\n%s", id, log.String())
			}
		})
	}
	known := func(p *agentProc) string { return seriesValue(agentMetrics(t, p), "vigil_failover_nodes_known") }
	version := func(p *agentProc) uint64 {
		snap, _, err := p.client().Publication(context.Background(), 0, 0)
		if err != nil || snap == nil {
			t.Fatalf("publication: %v", err)
		}
		return snap.Version
	}
	waitFor(t, "level 1 healthy and both nodes known", 30*time.Second, func() bool {
		return agent.site(t, "www")["levels"].(map[string]any)["1"] == "healthy" && known(agent) == "2"
	})
	before := version(agent)

	// The agent restarts on the same data and address.
	_ = agent.cmd.Process.Kill()
	<-agent.done
	agent = startAgentProc(t, config)
	if v := version(agent); v != before {
		t.Fatalf("the restarted agent publishes version %d, was %d: the test needs the same", v, before)
	}
	waitFor(t, "both nodes known to the restarted agent", 20*time.Second, func() bool { return known(agent) == "2" })
	if v := version(agent); v != before {
		t.Fatalf("a new version %d came before the nodes were known: the test proves nothing", v)
	}

	dead.Store(true)
	var rep api.FailoverReport
	waitFor(t, "the failover's complete report", 30*time.Second, func() bool {
		list, err := agent.client().Failovers(context.Background(), "www", 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Failovers) == 1 && list.Failovers[0].Complete {
			rep = list.Failovers[0]
			return true
		}
		return false
	})
	var text bytes.Buffer
	writeFailoverReport(&text, &rep)
	t.Logf("the report:\n%s", text.String())
	if len(rep.Nodes) != 2 {
		t.Fatalf("rows %+v, want edge-1 and edge-tmpl", rep.Nodes)
	}
	for i, name := range []string{"edge-1", "edge-tmpl"} {
		n := rep.Nodes[i]
		if n.Node != name || !n.Reported || n.Result != "ok" || n.Applied == nil || rep.Published == nil || n.Applied.Before(rep.Published.Time) {
			t.Errorf("row %+v (published %v), want %s's apply after the publication", n, rep.Published, name)
		}
	}
}
