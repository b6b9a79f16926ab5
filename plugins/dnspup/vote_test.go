package dnspup_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/dnspup"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// tally sorts a round's votes by target: the origins with checkpoint votes,
// and the Abstain votes by origin. It fails the test on a target with both,
// or on an abstention that is not the source's one per target.
func tally(t *testing.T, ballot sdk.Ballot, votes []sdk.Vote) (judged map[string]int, abstained map[string]sdk.Vote) {
	t.Helper()
	sdktest.CheckVotes(t, ballot, votes)
	judged, abstained = map[string]int{}, map[string]sdk.Vote{}
	for _, v := range votes {
		key := v.Site + "/" + v.Origin
		if v.Value != sdk.Abstain {
			judged[key]++
			continue
		}
		if v.Voter != dnspup.AbstainVoter || v.Detail == "" {
			t.Errorf("abstention %+v: want voter %q and a detail", v, dnspup.AbstainVoter)
		}
		if _, dup := abstained[key]; dup {
			t.Errorf("two abstentions for %s", key)
		}
		abstained[key] = v
	}
	for key := range judged {
		if _, ok := abstained[key]; ok {
			t.Errorf("%s got both checkpoint votes and an abstention", key)
		}
	}
	return judged, abstained
}

func manyTargets(n int) sdk.Ballot {
	var b sdk.Ballot
	for i := range n {
		b.Targets = append(b.Targets, target(fmt.Sprintf("o%d", i), fmt.Sprintf("http://good-%d.test", i)))
	}
	return b
}

// TestBudgetCutRotates: with room for 4 of 10 targets a round, each round
// asks for the targets asked least recently, so every target gets votes
// within ceil(10/4) = 3 rounds, and every cut target gets one over_budget
// abstention.
func TestBudgetCutRotates(t *testing.T) {
	h := newHarness(t, nil)
	h.configure(t, map[string]any{"batch_size": 2.0, "requests_per_round": 2.0, "concurrency": 2.0})
	ballot := manyTargets(10)
	seen := map[string]bool{}
	var previous map[string]int
	for round := 1; round <= 3; round++ {
		ballot.Round = uint64(round)
		votes, err := h.src.Vote(t.Context(), ballot)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		judged, abstained := tally(t, ballot, votes)
		wantJudged := min(4, 10-4*(round-1)) + max(0, 4*round-10) // round 3: o8, o9, then o0, o1
		if len(judged) != wantJudged || len(judged)+len(abstained) != 10 {
			t.Errorf("round %d: %d judged and %d abstained, want %d and %d", round, len(judged), len(abstained), wantJudged, 10-wantJudged)
		}
		for key, n := range judged {
			if n != 2 {
				t.Errorf("round %d: %s got %d votes, want one per checkpoint", round, key, n)
			}
			if previous[key] > 0 && round < 3 {
				t.Errorf("round %d: %s judged again while others wait", round, key)
			}
			seen[key] = true
		}
		for key, v := range abstained {
			if v.Reason != sdk.ReasonOverBudget {
				t.Errorf("round %d: %s abstained with %s, want over_budget", round, key, v.Reason)
			}
		}
		previous = judged
	}
	if len(seen) != 10 {
		t.Errorf("after 3 rounds only %d of 10 targets got votes: %v", len(seen), slices.Sorted(maps.Keys(seen)))
	}
	if got := h.src.Abstentions()["over_budget"]; got != 18 {
		t.Errorf("over_budget = %d, want 18 (6 a round)", got)
	}
	if n := strings.Count(h.logs.String(), "request budget reached"); n != 3 {
		t.Errorf("budget log lines = %d, want one a round", n)
	}
	if !strings.Contains(h.logs.String(), `"over_budget":6`) {
		t.Errorf("the budget log line does not give the count:\n%s", h.logs.String())
	}
}

// TestBudgetCutRotatesOverAChangingBallot: targets that leave the ballot
// (settled by an earlier source) do not make the rotation skip anyone.
func TestBudgetCutRotatesOverAChangingBallot(t *testing.T) {
	h := newHarness(t, nil)
	h.configure(t, map[string]any{"batch_size": 1.0, "requests_per_round": 2.0})
	full := manyTargets(6)
	waited := map[string]int{} // rounds since the last votes
	for round := 1; round <= 8; round++ {
		ballot := full
		if round%2 == 0 { // every other round, o0 is settled before dnspup
			ballot = sdk.Ballot{Targets: full.Targets[1:]}
		}
		votes, err := h.src.Vote(t.Context(), ballot)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		judged, _ := tally(t, ballot, votes)
		for _, tg := range ballot.Targets {
			key := tg.Site + "/" + tg.Origin
			if judged[key] > 0 {
				waited[key] = 0
			} else if waited[key]++; waited[key] >= 3 {
				t.Errorf("round %d: %s waited %d rounds in the ballot without votes", round, key, waited[key])
			}
		}
	}
}

// TestUnsupportedSettingsAbstain: a target whose health check dnspup cannot
// perform as configured gets one unsupported abstention naming the setting
// and is not sent; settings dnspup can honour (or that do not apply) are
// probed as usual.
func TestUnsupportedSettingsAbstain(t *testing.T) {
	with := func(origin, addr string, f func(*sdk.Target)) sdk.Target {
		tg := target(origin, addr)
		f(&tg)
		return tg
	}
	unsupported := map[string]string{ // origin -> the setting named
		"body":      "expected_body",
		"headers":   "headers",
		"ca":        "ca_file",
		"sni":       "tls_server_name",
		"insecure":  "insecure_skip_tls_verify",
		"redirects": "follow_redirects",
	}
	ballot := sdk.Ballot{Targets: []sdk.Target{
		with("body", "https://u-body.test", func(t *sdk.Target) { t.Expect.BodyContains = "OK" }),
		with("headers", "https://u-headers.test", func(t *sdk.Target) { t.Headers = map[string]string{"Authorization": "Bearer s3cret-token"} }),
		with("ca", "https://u-ca.test", func(t *sdk.Target) { t.TLS.CA = "internal" }),
		with("sni", "https://192.0.2.7", func(t *sdk.Target) { t.TLS.ServerName = "origin-a.internal" }),
		with("insecure", "https://u-insecure.test", func(t *sdk.Target) { t.TLS.InsecureSkipVerify = true }),
		with("redirects", "https://u-redirects.test", func(t *sdk.Target) { t.FollowRedirects = true }),
		// Supported: TLS settings on plain http do not apply, a server name
		// that is the URL's host is what the checkpoints send, and max_body
		// only bounds a body check.
		with("plain", "http://s-plain.test", func(t *sdk.Target) {
			t.TLS = sdk.TLSSettings{CA: "internal", ServerName: "other.test", InsecureSkipVerify: true}
		}),
		with("samename", "https://s-samename.test", func(t *sdk.Target) { t.TLS.ServerName = "S-SAMENAME.test" }),
		with("maxbody", "https://s-maxbody.test", func(t *sdk.Target) { t.MaxBody = 1024 }),
	}, CAs: map[string][]byte{"internal": []byte("-----BEGIN CERTIFICATE-----")}}

	h := newHarness(t, nil)
	h.configure(t, nil)
	for round := 1; round <= 2; round++ {
		votes, err := h.src.Vote(t.Context(), ballot)
		if err != nil {
			t.Fatal(err)
		}
		judged, abstained := tally(t, ballot, votes)
		for origin, setting := range unsupported {
			v, ok := abstained["www/"+origin]
			if !ok || v.Reason != sdk.ReasonUnsupported || !strings.Contains(v.Detail, setting) {
				t.Errorf("www/%s: abstention %+v, want unsupported naming %s", origin, v, setting)
			}
		}
		for _, origin := range []string{"plain", "samename", "maxbody"} {
			if judged["www/"+origin] != 2 {
				t.Errorf("www/%s: %d votes, want 2", origin, judged["www/"+origin])
			}
		}
	}
	for _, r := range h.fake.Requests() {
		if strings.Contains(string(r.Body), "u-") || strings.Contains(string(r.Body), "192.0.2.7") {
			t.Errorf("an unsupported target was sent: %s", r.Body)
		}
	}
	if got := h.src.Abstentions()["unsupported"]; got != 12 {
		t.Errorf("unsupported = %d, want 12 (6 a round)", got)
	}
	logs := h.logs.String()
	if n := strings.Count(logs, "cannot perform this origin's health check"); n != 6 {
		t.Errorf("unsupported warnings = %d, want one per target, not per round", n)
	}
	if strings.Contains(logs, "s3cret-token") {
		t.Error("a header value was logged")
	}
}

// TestSlowAPIAbstainsOutOfTime: with an API slower than the call's
// deadline, the request in flight is cut at the soft deadline and the ones
// that could not start are not sent; all their targets get out_of_time
// abstentions, never a Down or an error, and Vote returns before the
// deadline. The next round asks first for the targets that were not sent.
func TestSlowAPIAbstainsOutOfTime(t *testing.T) {
	h := newHarness(t, nil)
	h.configure(t, map[string]any{"batch_size": 1.0, "concurrency": 1.0, "requests_per_round": 3.0, "request_timeout": 30 * time.Second})
	h.fake.SetDelay(time.Hour)
	ballot := manyTargets(3)
	var sent []string
	for round := 1; round <= 2; round++ {
		// 3s: the source stops a tenth before it, a 300 ms margin that a
		// loaded machine keeps (100 ms did not always).
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		deadline, _ := ctx.Deadline()
		before := len(h.fake.Requests())
		votes, err := h.src.Vote(ctx, ballot)
		returned := time.Now()
		cancel()
		if err != nil {
			t.Fatalf("round %d: %v (running out of time is no failure)", round, err)
		}
		if !returned.Before(deadline) {
			t.Fatalf("round %d: Vote returned %s after its deadline", round, returned.Sub(deadline))
		}
		judged, abstained := tally(t, ballot, votes)
		if len(judged) != 0 || len(abstained) != 3 {
			t.Fatalf("round %d: judged %v, abstained %v; want 3 abstentions", round, judged, abstained)
		}
		details := map[string]int{}
		for _, v := range abstained {
			if v.Reason != sdk.ReasonOutOfTime {
				t.Errorf("round %d: %+v, want out_of_time", round, v)
			}
			details[v.Detail]++
		}
		if details["the round's deadline came while dnspup was probing"] != 1 || details["the round's time ran out before dnspup could be asked"] != 2 {
			t.Errorf("round %d: details %v, want 1 cut in flight and 2 not sent", round, details)
		}
		reqs := h.fake.Requests()[before:]
		if len(reqs) != 1 {
			t.Fatalf("round %d: %d requests sent, want 1", round, len(reqs))
		}
		sent = append(sent, string(reqs[0].Body))
	}
	if sent[0] == sent[1] {
		t.Errorf("the second round asked for the same target again: %s", sent[1])
	}
	if got := h.src.Abstentions()["out_of_time"]; got != 6 {
		t.Errorf("out_of_time abstentions = %d, want 6", got)
	}
	if got := h.src.Requests(); got["out_of_time"] != 2 || got["transport"] != 0 {
		t.Errorf("requests = %v, want 2 out_of_time and no transport failure", got)
	}
	if n := strings.Count(h.logs.String(), "the round's time ran out"); n != 2 {
		t.Errorf("out-of-time log lines = %d, want one a round", n)
	}
}

// TestRequestTimeoutIsAnAPIFailure: a request that runs out of its own
// request_timeout, well before the call's deadline, is a failure of the
// API (counted and returned as an error), not a lack of time.
func TestRequestTimeoutIsAnAPIFailure(t *testing.T) {
	h := newHarness(t, nil)
	h.configure(t, map[string]any{"request_timeout": 200 * time.Millisecond})
	h.fake.SetDelay(time.Hour)
	// The call's deadline is far away: a request that waited for it rather
	// than its request_timeout would be out of time, which the abstentions
	// below tell apart, whatever the machine's speed.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ballot := manyTargets(2)
	votes, err := h.src.Vote(ctx, ballot)
	if err == nil || len(votes) != 0 {
		t.Fatalf("votes %v, err %v; want an error", votes, err)
	}
	if got := h.src.Abstentions(); got["transport"] != 2 || got["out_of_time"] != 0 {
		t.Errorf("abstentions = %v, want 2 transport", got)
	}
}

// stuckTransport answers probe requests only when released, whatever their
// context says: a transport that does not honour cancellation.
type stuckTransport struct {
	release chan struct{}
	entered chan struct{}
}

func (s *stuckTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, "probes") {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-s.release
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestStuckTransportDoesNotOverrun: even a request that ignores its
// cancellation cannot hold Vote past the call's deadline.
func TestStuckTransportDoesNotOverrun(t *testing.T) {
	stuck := &stuckTransport{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	t.Cleanup(func() { close(stuck.release) })
	h := newHarness(t, nil)
	h.src = dnspup.New(nil, dnspup.Options{
		Getenv:     func(k string) string { return h.env[k] },
		HTTPClient: &http.Client{Transport: stuck},
	})
	h.configure(t, nil)
	// 3s: a 300 ms margin before the deadline, which a loaded machine keeps.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	ballot := manyTargets(2)
	votes, err := h.src.Vote(ctx, ballot)
	if !time.Now().Before(deadline) {
		t.Fatal("Vote overran its deadline")
	}
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-stuck.entered:
	default:
		t.Fatal("the request never reached the transport")
	}
	_, abstained := tally(t, ballot, votes)
	if len(abstained) != 2 {
		t.Fatalf("abstained %v, want both targets", abstained)
	}
	for _, v := range abstained {
		if v.Reason != sdk.ReasonOutOfTime {
			t.Errorf("%+v, want out_of_time", v)
		}
	}
	if got := h.src.Requests()["out_of_time"]; got != 1 {
		t.Errorf("requests = %v, want 1 out_of_time", h.src.Requests())
	}
}
