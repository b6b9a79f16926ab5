package dnspup_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/dnspup"
	"github.com/vigilcdn/vigil/plugins/dnspup/customerapi"
	"github.com/vigilcdn/vigil/plugins/dnspup/fakeapi"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

const (
	testKey    = "pk-7c41e0aa93"
	testSecret = "ps-52d9bb17f6"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type harness struct {
	fake  *fakeapi.Server
	url   string
	src   *dnspup.Source
	logs  *sdktest.LogBuffer
	clock *clock
	env   map[string]string
}

// targetProbe scripts what the pretend checkpoints see, by a word in the
// target URL.
func targetProbe(_ context.Context, target string) fakeapi.Result {
	switch {
	case strings.Contains(target, "bad"):
		return fakeapi.Result{Status: 503, LatencyMs: 20}
	case strings.Contains(target, "slow"):
		return fakeapi.Result{Error: "timeout"}
	case strings.Contains(target, "refused"):
		return fakeapi.Result{Error: "connection refused"}
	case strings.Contains(target, "cert"):
		return fakeapi.Result{Error: "tls: failed to verify certificate: x509: certificate signed by unknown authority"}
	case strings.Contains(target, "missing"):
		return fakeapi.Result{Status: 404, LatencyMs: 9}
	}
	return fakeapi.Result{Status: 200, LatencyMs: 15}
}

func newHarness(t *testing.T, handler func(*fakeapi.Server) http.Handler) *harness {
	t.Helper()
	h := &harness{
		fake:  fakeapi.New(fakeapi.Options{Key: testKey, Secret: testSecret, Probe: targetProbe}),
		logs:  &sdktest.LogBuffer{},
		clock: &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
		env:   map[string]string{"DNSPUP_API_KEY": testKey, "DNSPUP_API_SECRET": testSecret},
	}
	var hnd http.Handler = h.fake
	if handler != nil {
		hnd = handler(h.fake)
	}
	hs := httptest.NewServer(hnd)
	t.Cleanup(hs.Close)
	h.url = hs.URL
	log := hclog.New(&hclog.LoggerOptions{Output: h.logs, Level: hclog.Trace, JSONFormat: true})
	h.src = dnspup.New(log, dnspup.Options{
		Getenv:       func(k string) string { return h.env[k] },
		Now:          h.clock.Now,
		RetryWaitMax: 50 * time.Millisecond,
	})
	return h
}

func (h *harness) config(extra map[string]any) sdk.Config {
	v := map[string]any{
		"api_base":        h.url,
		"checkpoints":     []string{"ams-1", "fra-1"},
		"request_timeout": 5 * time.Second,
	}
	for k, x := range extra {
		if x == nil {
			delete(v, k)
		} else {
			v[k] = x
		}
	}
	return sdk.Config{Values: v}
}

func (h *harness) configure(t *testing.T, extra map[string]any) {
	t.Helper()
	if err := h.src.Configure(t.Context(), h.config(extra)); err != nil {
		t.Fatalf("Configure: %v", err)
	}
}

func target(origin, addr string) sdk.Target {
	return sdk.Target{Site: "www", Origin: origin, Address: addr, Host: "www.example.com", Path: "/cdn-health", Timeout: 5 * time.Second}
}

// summary renders votes as "origin voter value reason" lines, sorted.
func summary(votes []sdk.Vote) []string {
	var out []string
	for _, v := range votes {
		out = append(out, fmt.Sprintf("%s/%s %s %s %s", v.Site, v.Origin, v.Voter, v.Value, v.Reason))
	}
	slices.Sort(out)
	return out
}

func TestConfigureRejects(t *testing.T) {
	tests := []struct {
		name   string
		extra  map[string]any
		env    map[string]string
		path   string   // AttributePath of the first diagnostic
		has    []string // substrings of the error
		hasNot []string
	}{
		{name: "missing key", env: map[string]string{"DNSPUP_API_SECRET": testSecret},
			path: "api_key_env", has: []string{"DNSPUP_API_KEY", "not set", "env = ["}},
		{name: "missing secret under a custom name", extra: map[string]any{"api_secret_env": "PUP_SECRET"},
			path: "api_secret_env", has: []string{"PUP_SECRET", "not set"}},
		{name: "value given instead of a name", extra: map[string]any{"api_key_env": "pk-7c41e0aa93 "},
			path: "api_key_env", has: []string{"not an environment variable name"}},
		{name: "unknown checkpoint", extra: map[string]any{"checkpoints": []string{"fra-1", "mars-9"}},
			path: "checkpoints[1]", has: []string{`"mars-9"`, "ams-1, fra-1, nyc-1"}},
		{name: "duplicate checkpoint", extra: map[string]any{"checkpoints": []string{"fra-1", "fra-1"}},
			path: "checkpoints[1]", has: []string{"twice"}},
		{name: "checkpoints and count", extra: map[string]any{"checkpoint_count": 2.0},
			path: "checkpoint_count", has: []string{"both set"}},
		{name: "count above the nodes", extra: map[string]any{"checkpoints": nil, "checkpoint_count": 5.0},
			path: "checkpoint_count", has: []string{"only 3 online", "nyc-1"}},
		{name: "ip version", extra: map[string]any{"ip_version": "v4"},
			path: "ip_version", has: []string{`"4" or "6"`}},
		{name: "budget", extra: map[string]any{"requests_per_round": 0.0},
			path: "requests_per_round", has: []string{"out of range"}},
		{name: "fraction", extra: map[string]any{"concurrency": 1.5},
			path: "concurrency", has: []string{"whole number"}},
		{name: "api base", extra: map[string]any{"api_base": "api.dnspup.com"},
			path: "api_base", has: []string{"absolute http or https URL"}},
		{name: "wrong credentials", env: map[string]string{"DNSPUP_API_KEY": "nope-key-1", "DNSPUP_API_SECRET": "nope-secret-1"},
			path: "api_key_env", has: []string{"rejected", "DNSPUP_API_KEY"}, hasNot: []string{"nope-key-1", "nope-secret-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			if tt.env != nil {
				h.env = tt.env
			}
			err := h.src.Configure(t.Context(), h.config(tt.extra))
			var diags sdk.Diagnostics
			if !errors.As(err, &diags) || len(diags) == 0 {
				t.Fatalf("Configure = %v, want diagnostics", err)
			}
			if diags[0].AttributePath != tt.path {
				t.Errorf("path = %q, want %q (%v)", diags[0].AttributePath, tt.path, err)
			}
			for _, s := range tt.has {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q: %v", s, err)
				}
			}
			for _, s := range append(tt.hasNot, testKey, testSecret) {
				if strings.Contains(err.Error()+h.logs.String(), s) {
					t.Errorf("error or log shows %q", s)
				}
			}
		})
	}
}

func TestVoteOnePerCheckpointPerOrigin(t *testing.T) {
	h := newHarness(t, nil)
	h.configure(t, map[string]any{"ip_version": "6"})
	withBody := target("a7", "http://good-b.test")
	withBody.Expect.BodyContains = "OK"
	strict := target("a8", "http://missing.test")
	strict.Expect.Statuses = []int{200}
	ballot := sdk.Ballot{Round: 1, Targets: []sdk.Target{
		target("a1", "https://good.test"),
		target("a2", "https://bad.test:8443"),
		target("a3", "http://slow.test"),
		target("a4", "http://refused.test"),
		target("a5", "https://cert.test"),
		target("a6", "http://missing.test"),
		withBody,
		strict,
		{Site: "api", Origin: "x1", Address: "https://good.test", Path: "/cdn-health"}, // same URL as www/a1
	}}
	votes, err := h.src.Vote(t.Context(), ballot)
	if err != nil {
		t.Fatalf("Vote: %v", err)
	}
	want := []string{"www/a7 dnspup abstain unsupported"}
	for _, row := range []string{
		"www/a1 up ok", "www/a2 down http_5xx", "www/a3 down timeout", "www/a4 down connect_failed",
		"www/a5 down tls_failed", "www/a6 up ok", "www/a8 down unexpected_status", "api/x1 up ok",
	} {
		origin, rest, _ := strings.Cut(row, " ")
		for _, cp := range []string{"ams-1", "fra-1"} {
			want = append(want, origin+" dnspup:"+cp+" "+rest)
		}
	}
	slices.Sort(want)
	if got := summary(votes); !slices.Equal(got, want) {
		t.Errorf("votes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	sdktest.CheckVotes(t, ballot, votes)
	for _, v := range votes {
		if v.Detail == "" {
			t.Errorf("vote %+v: empty detail", v)
		}
	}

	reqs := h.fake.Requests()
	last := reqs[len(reqs)-1]
	if last.Path != "/v1/batch-probes" {
		t.Fatalf("last request %s %s", last.Method, last.Path)
	}
	body := string(last.Body)
	for _, s := range []string{`"type":"http"`, `"ipVersion":"6"`, `"count":1`, `"method":"GET"`, `"nodeIds":["ams-1","fra-1"]`, `"https://bad.test:8443/cdn-health"`} {
		if !strings.Contains(body, s) {
			t.Errorf("batch body lacks %s: %s", s, body)
		}
	}
	if strings.Count(body, "https://good.test/cdn-health") != 1 {
		t.Errorf("a URL shared by two origins is probed once: %s", body)
	}
	if strings.Contains(body, "good-b.test") {
		t.Errorf("a target with a body check was sent: %s", body)
	}
	if got := h.src.Abstentions()["unsupported"]; got != 1 {
		t.Errorf("unsupported = %d, want 1", got)
	}
}

func TestVoteWithCheckpointCountAndSingleProbes(t *testing.T) {
	h := newHarness(t, nil)
	h.configure(t, map[string]any{"checkpoints": nil, "checkpoint_count": 2.0, "batch_size": 1.0})
	votes, err := h.src.Vote(t.Context(), sdk.Ballot{Targets: []sdk.Target{target("a1", "https://good.test"), target("a2", "https://bad.test")}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"www/a1 dnspup:ams-1 up ok", "www/a1 dnspup:fra-1 up ok", "www/a2 dnspup:ams-1 down http_5xx", "www/a2 dnspup:fra-1 down http_5xx"}
	if got := summary(votes); !slices.Equal(got, want) {
		t.Errorf("votes = %v, want %v", got, want)
	}
	if n := h.fake.Count("/v1/probes"); n != 2 {
		t.Errorf("POST /v1/probes sent %d times, want 2", n)
	}
}

func TestBudgetIsRespected(t *testing.T) {
	tests := []struct {
		name                  string
		batch, budget, conc   float64
		targets               int
		path                  string
		wantRequests, covered int
	}{
		{"batched", 2, 3, 2, 25, "/v1/batch-probes", 3, 6},
		{"single", 1, 4, 3, 10, "/v1/probes", 4, 4},
		{"within budget", 10, 5, 2, 25, "/v1/batch-probes", 3, 25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.configure(t, map[string]any{"batch_size": tt.batch, "requests_per_round": tt.budget, "concurrency": tt.conc})
			var ballot sdk.Ballot
			for i := range tt.targets {
				ballot.Targets = append(ballot.Targets, target(fmt.Sprintf("o%d", i), fmt.Sprintf("http://good-%d.test", i)))
			}
			for round := 1; round <= 2; round++ {
				votes, err := h.src.Vote(t.Context(), ballot)
				if err != nil {
					t.Fatal(err)
				}
				sdktest.CheckVotes(t, ballot, votes)
				judged, over := 0, 0
				for _, v := range votes {
					switch {
					case v.Value != sdk.Abstain:
						judged++
					case v.Reason == sdk.ReasonOverBudget && v.Voter == dnspup.AbstainVoter:
						over++
					default:
						t.Errorf("round %d: unexpected abstention %+v", round, v)
					}
				}
				if judged != 2*tt.covered || over != tt.targets-tt.covered {
					t.Errorf("round %d: %d votes and %d over_budget abstentions, want %d and %d",
						round, judged, over, 2*tt.covered, tt.targets-tt.covered)
				}
				if n := h.fake.Count(tt.path); n != round*tt.wantRequests {
					t.Errorf("round %d: %d requests in total, want %d", round, n, round*tt.wantRequests)
				}
			}
			if got, want := h.src.Abstentions()["over_budget"], uint64(2*(tt.targets-tt.covered)); got != want {
				t.Errorf("over_budget = %d, want %d", got, want)
			}
			if tt.covered < tt.targets && !strings.Contains(h.logs.String(), "request budget reached") {
				t.Errorf("over-budget abstention not logged")
			}
		})
	}
}

// TestVoteErrorTable walks the error table: each row abstains with a
// logged reason and a counter, then holds off (or not) as the table says.
func TestVoteErrorTable(t *testing.T) {
	tests := []struct {
		code       string
		retryAfter time.Duration
		label      string
		log        string
		// held[i]: after advancing the clock by advance[i], is the next round
		// still sent no request?
		advance []time.Duration
		held    []bool
	}{
		{customerapi.CodeInvalidRequest, 0, "invalid", "not retried", []time.Duration{0}, []bool{false}},
		{customerapi.CodeInvalidNodes, 0, "invalid", "fix checkpoints", []time.Duration{0}, []bool{false}},
		{customerapi.CodeTrustedDNSResolutionFailed, 0, "invalid", "not retried", []time.Duration{0}, []bool{false}},
		{customerapi.CodeUnauthorized, 0, "unauthorized", "ALERT", []time.Duration{0, 24 * time.Hour}, []bool{true, true}},
		{customerapi.CodeSourceForbidden, 0, "forbidden", "does not allow", []time.Duration{0}, []bool{false}},
		{customerapi.CodeTargetRestricted, 0, "forbidden", "does not allow", []time.Duration{0}, []bool{false}},
		{customerapi.CodeToolNotAllowed, 0, "forbidden", "does not allow", []time.Duration{0}, []bool{false}},
		{customerapi.CodeEntitlementExceeded, 0, "entitlement", "does not allow", []time.Duration{0}, []bool{false}},
		{customerapi.CodeQuotaExceeded, 0, "quota", "quota exceeded", []time.Duration{0, 59 * time.Minute, 2 * time.Minute}, []bool{true, true, false}},
		{customerapi.CodeRateLimited, 5 * time.Second, "rate_limited", "Retry-After", []time.Duration{0, 4900 * time.Millisecond, time.Second}, []bool{true, true, false}},
		{customerapi.CodeCapacityLimited, 0, "rate_limited", "Retry-After", []time.Duration{29 * time.Second, 5 * time.Second}, []bool{true, false}},
		{customerapi.CodeServiceUnavailable, 0, "unavailable", "service unavailable", []time.Duration{0}, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			h := newHarness(t, nil)
			h.configure(t, nil)
			ballot := sdk.Ballot{Targets: []sdk.Target{target("a1", "https://good.test"), target("a2", "https://good-2.test")}}
			h.fake.FailNext(tt.code, tt.retryAfter, 0)
			votes, err := h.src.Vote(t.Context(), ballot)
			if len(votes) != 0 || err == nil {
				t.Fatalf("round 1: votes %v, err %v; want no votes and an error", votes, err)
			}
			if got := h.src.Abstentions()[tt.label]; got != 2 {
				t.Errorf("abstentions[%s] = %d, want 2 (%v)", tt.label, got, h.src.Abstentions())
			}
			if !strings.Contains(h.logs.String(), tt.log) {
				t.Errorf("log lacks %q:\n%s", tt.log, h.logs.String())
			}
			h.fake.FailNext("", 0, 0)
			for i, d := range tt.advance {
				h.clock.Advance(d)
				before := h.fake.Count("/v1/batch-probes")
				votes, err := h.src.Vote(t.Context(), ballot)
				sent := h.fake.Count("/v1/batch-probes") > before
				if sent == tt.held[i] {
					t.Fatalf("step %d (+%s): request sent = %v, want %v", i, d, sent, !tt.held[i])
				}
				if tt.held[i] && (len(votes) != 0 || err == nil) {
					t.Errorf("step %d: held but votes %v, err %v", i, votes, err)
				}
				if !tt.held[i] && (len(votes) != 4 || err != nil) {
					t.Errorf("step %d: votes %v, err %v; want 4 votes", i, votes, err)
				}
			}
			if tt.code == customerapi.CodeUnauthorized {
				h.configure(t, nil) // reconfiguring lifts the stop
				if votes, err := h.src.Vote(t.Context(), ballot); len(votes) != 4 || err != nil {
					t.Errorf("after Configure: votes %v, err %v", votes, err)
				}
			}
		})
	}
}

func TestTransportFailureAbstainsWithoutRetry(t *testing.T) {
	h := newHarness(t, func(fake *fakeapi.Server) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/batch-probes" {
				fake.ServeHTTP(httptest.NewRecorder(), r) // counted and "accepted", answer lost
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			fake.ServeHTTP(w, r)
		})
	})
	h.configure(t, nil)
	votes, err := h.src.Vote(t.Context(), sdk.Ballot{Targets: []sdk.Target{target("a1", "https://good.test")}})
	if len(votes) != 0 || err == nil {
		t.Fatalf("votes %v, err %v", votes, err)
	}
	if n := h.fake.Count("/v1/batch-probes"); n != 1 {
		t.Errorf("POST sent %d times, want 1", n)
	}
	if got := h.src.Abstentions()["transport"]; got != 1 {
		t.Errorf("abstentions = %v", h.src.Abstentions())
	}
	if !strings.Contains(h.logs.String(), "not retried") {
		t.Errorf("log does not say why it was not retried:\n%s", h.logs.String())
	}
}

// TestSecretsAbsentFromLogsAndErrors runs the source through success,
// rejection (by a server that echoes the credentials) and failure, and
// looks for the credential values in everything it logged or returned.
func TestSecretsAbsentFromLogsAndErrors(t *testing.T) {
	var echo sync.Mutex
	echoing := false
	h := newHarness(t, func(fake *fakeapi.Server) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			echo.Lock()
			e := echoing
			echo.Unlock()
			if e {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintf(w, `{"error":{"code":"unauthorized","message":"key %s secret %s is not valid"}}`,
					r.Header.Get("X-API-Key"), r.Header.Get("X-API-Secret"))
				return
			}
			fake.ServeHTTP(w, r)
		})
	})
	var texts []string
	h.configure(t, nil)
	ballot := sdk.Ballot{Targets: []sdk.Target{target("a1", "https://good.test"), target("a2", "https://bad.test")}}
	votes, err := h.src.Vote(t.Context(), ballot)
	if err != nil || len(votes) != 4 {
		t.Fatalf("Vote: %v %v", votes, err)
	}
	for _, v := range votes {
		texts = append(texts, fmt.Sprintf("%+v", v))
	}
	h.fake.FailNext(customerapi.CodeRateLimited, time.Minute, 1)
	_, err = h.src.Vote(t.Context(), ballot)
	texts = append(texts, fmt.Sprint(err))

	echo.Lock()
	echoing = true
	echo.Unlock()
	err = h.src.Configure(t.Context(), h.config(nil))
	texts = append(texts, fmt.Sprint(err))
	h.clock.Advance(time.Hour)
	_, err = h.src.Vote(t.Context(), ballot)
	texts = append(texts, fmt.Sprint(err))
	_, err = h.src.Vote(t.Context(), ballot)
	texts = append(texts, fmt.Sprint(err))

	h.env["DNSPUP_API_SECRET"] = ""
	err = h.src.Configure(t.Context(), h.config(nil))
	texts = append(texts, fmt.Sprint(err), h.logs.String())

	all := strings.Join(texts, "\n")
	if !strings.Contains(all, "ALERT") || !strings.Contains(all, "[redacted]") {
		t.Fatalf("the rejection path did not run:\n%s", all)
	}
	for _, s := range []string{testKey, testSecret} {
		if strings.Contains(all, s) {
			t.Errorf("secret %q appears in logs or errors:\n%s", s, all)
		}
	}
}

func TestInfoAndSchema(t *testing.T) {
	src := dnspup.New(nil, dnspup.Options{})
	info, err := src.Info(t.Context())
	if err != nil || info.Name != "vigil-source-dnspup" {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	s, err := src.ConfigSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range s.Attributes {
		names = append(names, a.Name)
		if a.Description == "" || a.Required {
			t.Errorf("attribute %s: no description, or required", a.Name)
		}
	}
	want := []string{"api_base", "api_key_env", "api_secret_env", "checkpoints", "checkpoint_count", "ip_version", "request_timeout", "requests_per_round", "concurrency", "batch_size", "quota_backoff"}
	if !slices.Equal(names, want) {
		t.Errorf("schema = %v, want %v", names, want)
	}
	if _, err := src.Vote(t.Context(), sdk.Ballot{Targets: []sdk.Target{target("a1", "http://x.test")}}); err == nil {
		t.Error("Vote before Configure succeeded")
	}
}
