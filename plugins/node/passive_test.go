package node

import (
	"testing"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/sdk"
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
