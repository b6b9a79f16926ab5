package node

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/publication"
)

func passiveTargets() []sdk.Target {
	return []sdk.Target{
		{Site: "www", Origin: "a1", Address: "http://192.0.2.1"},
		{Site: "www", Origin: "a2", Address: "http://192.0.2.2"},
		{Site: "www", Origin: "a3", Address: "http://192.0.2.3"},
		{Site: "www", Origin: "a4", Address: "http://192.0.2.4"},
		{Site: "www", Origin: "a5", Address: "http://192.0.2.5"},
	}
}

func passiveAnswer() *pb.BatchResult {
	return &pb.BatchResult{Results: []*pb.ProbeResult{
		// a1: 7 of 20 failed, mostly 5xx: down http_5xx.
		{Job: 0, Up: true, Reason: "ok", Passive: &pb.PassiveResult{Requests: 20, Failures: 7, Timeouts: 2}},
		// a2: 2 of 20 failed: up.
		{Job: 1, Up: true, Reason: "ok", Passive: &pb.PassiveResult{Requests: 20, Failures: 2}},
		// a3: 4 requests only: sparse.
		{Job: 2, Up: true, Reason: "ok", Passive: &pb.PassiveResult{Requests: 4, Failures: 4}},
		// a4: no traffic: sparse. The probe says down.
		{Job: 3, Up: false, Reason: "http_5xx", Detail: "status 500"},
		// a5: 20 requests, 8 ignored (backpressure), of the 12 others 6 timed out: down timeout.
		{Job: 4, Up: true, Reason: "ok", Passive: &pb.PassiveResult{Requests: 20, Ignored: 8, Failures: 6, Timeouts: 6}},
	}}
}

func TestToVotesWithoutPassive(t *testing.T) {
	all := passiveTargets()
	votes := toVotes("edge-1", all, []int{0, 1, 2, 3, 4}, passiveAnswer(), nil, nil)
	if len(votes) != 5 {
		t.Fatalf("votes = %+v, want the 5 probe votes only", votes)
	}
	for _, v := range votes {
		if v.Voter != "edge-1" {
			t.Fatalf("vote %+v: voter %q, want edge-1 (no passive vote without the opt-in)", v, v.Voter)
		}
	}
}

func TestToVotesWithPassive(t *testing.T) {
	all := passiveTargets()
	rule := &passiveRule{minRequests: DefaultPassiveMinRequests, failureRatio: DefaultPassiveFailureRatio}
	votes := toVotes("edge-1", all, []int{0, 1, 2, 3, 4}, passiveAnswer(), rule, nil)
	if len(votes) != 10 {
		t.Fatalf("got %d votes, want 5 probe votes and 5 passive ones: %+v", len(votes), votes)
	}
	passive := map[string]sdk.Vote{}
	probes := 0
	for _, v := range votes {
		switch v.Voter {
		case "edge-1":
			probes++
		case "edge-1/passive":
			passive[v.Origin] = v
		default:
			t.Fatalf("unexpected voter %q", v.Voter)
		}
	}
	if probes != 5 {
		t.Fatalf("%d probe votes, want 5", probes)
	}
	want := map[string]struct {
		value  sdk.Value
		reason sdk.Reason
		plugin string
		detail string
	}{
		"a1": {sdk.Down, sdk.ReasonHTTP5xx, "", "7 of 20 requests failed (35%)"},
		"a2": {sdk.Up, sdk.ReasonOK, "", "2 of 20 requests failed (10%)"},
		"a3": {sdk.Abstain, sdk.ReasonNoVoter, "node/passive_sparse", "4 requests in the passive window (0 ignored), fewer than passive_min_requests 10"},
		"a4": {sdk.Abstain, sdk.ReasonNoVoter, "node/passive_sparse", "0 requests in the passive window (0 ignored), fewer than passive_min_requests 10"},
		"a5": {sdk.Down, sdk.ReasonTimeout, "", "6 of 12 requests failed (50%); 0 slow, 8 ignored"},
	}
	for origin, w := range want {
		v := passive[origin]
		if v.Value != w.value || v.Reason != w.reason || v.PluginReason != w.plugin || v.Detail != w.detail {
			t.Errorf("%s: passive vote %v %v %q %q, want %v %v %q %q", origin, v.Value, v.Reason, v.PluginReason, v.Detail, w.value, w.reason, w.plugin, w.detail)
		}
		if v.PluginReason != "" && !sdk.ValidPluginReason(v.PluginReason) {
			t.Errorf("%s: invalid plugin reason %q", origin, v.PluginReason)
		}
	}
}

// Slow answers count toward the ratio; when they are most of the failures
// the reason is too_slow.
func TestPassiveVoteSlow(t *testing.T) {
	rule := &passiveRule{minRequests: 10, failureRatio: 0.3}
	tg := &sdk.Target{Site: "www", Origin: "a1"}
	v := rule.vote(tg, "n/passive", &pb.PassiveResult{Requests: 20, Failures: 1, Slow: 6})
	if v.Value != sdk.Down || v.Reason != sdk.ReasonTooSlow || v.Detail != "7 of 20 requests failed (35%); 6 slow, 0 ignored" {
		t.Fatalf("vote = %+v", v)
	}
	// Exactly at the ratio is no failure: past it is.
	v = rule.vote(tg, "n/passive", &pb.PassiveResult{Requests: 20, Failures: 6})
	if v.Value != sdk.Up {
		t.Fatalf("6 of 20 = %+v, want up", v)
	}
}

// A node id too long to take the suffix casts no passive vote.
func TestToVotesPassiveVoterTooLong(t *testing.T) {
	long := string(make([]byte, 0, 128))
	for len(long) < 125 {
		long += "n"
	}
	rule := &passiveRule{minRequests: 1, failureRatio: 0.3}
	votes := toVotes(long, passiveTargets(), []int{0}, &pb.BatchResult{Results: passiveAnswer().Results[:1]}, rule, nil)
	if len(votes) != 1 || votes[0].Voter != long {
		t.Fatalf("votes = %+v", votes)
	}
}

func TestPassiveConfig(t *testing.T) {
	env := func(string) string { return "tok" }
	base := sdk.Config{Values: map[string]any{"listen": "127.0.0.1:0", "token_env": "T"}}
	st, err := parseConfig(base, env)
	if err != nil || st.passive || st.passiveMinRequests != DefaultPassiveMinRequests || st.passiveFailureRatio != DefaultPassiveFailureRatio {
		t.Fatalf("defaults: %+v %v", st, err)
	}
	cfg := sdk.Config{Values: map[string]any{"listen": "127.0.0.1:0", "token_env": "T", "passive_votes": true, "passive_min_requests": 5.0, "passive_failure_ratio": 0.5}}
	st, err = parseConfig(cfg, env)
	if err != nil || !st.passive || st.passiveMinRequests != 5 || st.passiveFailureRatio != 0.5 {
		t.Fatalf("opt-in: %+v %v", st, err)
	}
	for _, bad := range []sdk.Config{
		{Values: map[string]any{"listen": "127.0.0.1:0", "token_env": "T", "passive_min_requests": 0.0}},
		{Values: map[string]any{"listen": "127.0.0.1:0", "token_env": "T", "passive_min_requests": 2.5}},
		{Values: map[string]any{"listen": "127.0.0.1:0", "token_env": "T", "passive_failure_ratio": 1.0}},
		{Values: map[string]any{"listen": "127.0.0.1:0", "token_env": "T", "passive_failure_ratio": 0.0}},
	} {
		if _, err := parseConfig(bad, env); err == nil {
			t.Errorf("parseConfig(%v) = nil error", bad)
		}
	}
}

// A passive-only job gives a passive vote and no probe vote; missing, it
// abstains as the passive voter.
func TestToVotesPassiveOnly(t *testing.T) {
	all := passiveTargets()
	rule := &passiveRule{minRequests: 10, failureRatio: 0.3}
	res := &pb.BatchResult{Results: []*pb.ProbeResult{
		{Job: 0, NotRun: true, Reason: "passive_only", Passive: &pb.PassiveResult{Requests: 20, Failures: 7}},
	}}
	votes := toVotes("edge-2", all, []int{0, 1}, res, rule, map[int]bool{0: true, 1: true})
	if len(votes) != 2 || votes[0].Voter != "edge-2/passive" || votes[0].Value != sdk.Down ||
		votes[1].Voter != "edge-2/passive" || votes[1].Value != sdk.Abstain || votes[1].Origin != "a2" {
		t.Fatalf("votes = %+v", votes)
	}
}

// Every passive node eligible for a site reports its window on the targets
// it was not chosen to probe; nodes without the feature or the labels do
// not.
func TestAddPassive(t *testing.T) {
	targets := passiveTargets()[:2]
	a := &conn{id: "a", passive: true}
	b := &conn{id: "b", passive: true, labels: map[string]string{"pop": "x"}}
	c := &conn{id: "c"}
	plan, _ := assign(1, targets, []*conn{a, b, c}, 1, nil)
	plan = addPassive(plan, targets, []*conn{a, b, c}, nil)
	probes, passives := map[string]int{}, map[string]int{}
	for _, w := range plan {
		for _, ti := range w.targets {
			if w.passiveOnly[ti] {
				passives[w.node.id]++
			} else {
				probes[w.node.id]++
			}
		}
	}
	if probes["a"]+probes["b"]+probes["c"] != 2 || passives["a"]+probes["a"] != 2 || passives["b"]+probes["b"] != 2 || passives["c"] != 0 {
		t.Fatalf("probes %v, passive-only %v", probes, passives)
	}
}

// withProxying makes the agent follow cp's publication and proxy on a
// port of its own, with canaries every canary.
func withProxying(cp string, canary time.Duration) agentOpt {
	return func(c *nodeagent.Config) {
		c.ControlPlane, c.PollWait, c.ProxyListen, c.CanaryInterval = cp, 5*time.Second, "127.0.0.1:0", canary
	}
}

// TestHeldWindowVotes: a real node proxies visitors to a1, whose real
// paths fail while its health path is green. Once the publication moves
// the site to level 2, the gateway still casts the node's passive vote on
// a1 down from the held window (before, the window was dropped and the
// vote fell silent). When a1 truly recovers, the node's canaries clear the
// window and the passive vote abstains: the probes decide again.
func TestHeldWindowVotes(t *testing.T) {
	var sick atomic.Bool
	canaries := make(chan string, 1000) // the paths of the canaries a1 saw
	a1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() == nodeagent.CanaryUserAgent {
			select {
			case canaries <- r.URL.Path:
			default:
			}
		}
		if r.URL.Path != "/cdn-health" && sick.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "a1")
	}))
	t.Cleanup(a1.Close)
	b1 := origin(t, http.StatusOK)
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	site := func(level int, name, address string) []publication.Site {
		return []publication.Site{{Name: "www", Hostname: "www.example.com", Level: level,
			Origins: []publication.Origin{{Name: name, Address: address, State: "healthy"}}}}
	}
	v := cp.Publish(site(1, "a1", a1.URL))

	gw := startGateway(t, map[string]any{"passive_votes": true})
	node := startAgent(t, gw.Addr().String(), "edge-1", withProxying(cp.URL(), 50*time.Millisecond))
	proxyAddr := node.await(t, nodeagent.EventListening).Addr.String()
	for e := node.await(t, nodeagent.EventPublication); e.Version != v; e = node.await(t, nodeagent.EventPublication) {
	}
	awaitOnline(t, gw, 1)

	client := &http.Client{Timeout: 5 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	sick.Store(true)
	for range 20 {
		req, _ := http.NewRequest(http.MethodGet, "http://"+proxyAddr+"/page", nil)
		req.Host = "www.example.com"
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("visitor got %d, want a1's 500", resp.StatusCode)
		}
	}
	ballot := sdk.Ballot{Targets: []sdk.Target{
		{Site: "www", Origin: "a1", Address: a1.URL, Host: "www.example.com", Path: "/cdn-health", Timeout: 2 * time.Second},
		{Site: "www", Origin: "b1", Address: b1, Host: "www.example.com", Path: "/cdn-health", Timeout: 2 * time.Second},
	}}
	round := uint64(0)
	passiveOnA1 := func() sdk.Vote {
		t.Helper()
		round++
		ballot.Round = round
		for _, vt := range vote(t, gw, ballot, 10*time.Second) {
			if vt.Origin == "a1" && vt.Voter == "edge-1"+PassiveSuffix {
				return vt
			}
		}
		t.Fatalf("round %d: no passive vote on a1", round)
		return sdk.Vote{}
	}
	if vt := passiveOnA1(); vt.Value != sdk.Down {
		t.Fatalf("served a1, failing traffic: passive vote %+v, want down", vt)
	}

	// The failover: a1 leaves the publication; its window is held.
	v = cp.Publish(site(2, "b1", b1))
	for e := node.await(t, nodeagent.EventPublication); e.Version != v; e = node.await(t, nodeagent.EventPublication) {
	}
	for range 3 {
		if vt := passiveOnA1(); vt.Value != sdk.Down || !strings.HasSuffix(vt.Detail, "requests failed (100%)") {
			t.Fatalf("a1 no longer served, canaries failing: passive vote %+v, want down", vt)
		}
	}

	select {
	case path := <-canaries:
		if path != "/page" {
			t.Fatalf("canary of %q, want /page, the path the visitors failed on", path)
		}
	case <-time.After(time.Minute): // catches a hang only
		t.Fatal("no canary reached a1 in a minute")
	}

	// a1 recovers: the canaries clear the held window.
	sick.Store(false)
	deadline := time.Now().Add(time.Minute) // catches a hang only
	for {
		vt := passiveOnA1()
		if vt.Value == sdk.Abstain && vt.PluginReason == "node/passive_sparse" {
			break
		}
		if vt.Value == sdk.Up {
			t.Fatalf("passive vote %+v: a cleared window gives no vote, not an up", vt)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a1 recovered, passive vote still %+v after a minute", vt)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
