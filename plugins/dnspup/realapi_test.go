package dnspup_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/dnspup"
	"github.com/vigilcdn/vigil/plugins/dnspup/fakeapi"
	"github.com/vigilcdn/vigil/sdk"
)

// withPolling rebuilds h.src to poll 202 results every few milliseconds.
func withPolling(h *harness) {
	log := hclog.New(&hclog.LoggerOptions{Output: h.logs, Level: hclog.Trace, JSONFormat: true})
	h.src = dnspup.New(log, dnspup.Options{
		Getenv:       func(k string) string { return h.env[k] },
		Now:          h.clock.Now,
		RetryWaitMax: 50 * time.Millisecond,
		PollInterval: 5 * time.Millisecond,
	})
}

// TestVoteAsyncResults: a 202 answer is polled within the round; one never
// ready ends as dnspup/pending abstentions, logged once per round, and
// still counts as quota spent.
func TestVoteAsyncResults(t *testing.T) {
	tests := []struct {
		name        string
		polls       int
		wantVotes   []string
		wantPending uint64
	}{
		{"ready at the third poll", 3, []string{
			"www/a1 dnspup:ams-1 up ok", "www/a1 dnspup:fra-1 up ok",
			"www/a2 dnspup:ams-1 down http_5xx", "www/a2 dnspup:fra-1 down http_5xx",
		}, 0},
		{"never ready", fakeapi.AsyncNever, []string{
			"www/a1 dnspup abstain out_of_time", "www/a2 dnspup abstain out_of_time",
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			withPolling(h)
			h.configure(t, nil)
			h.fake.SetAsync(tt.polls)
			ballot := sdk.Ballot{Round: 7, Targets: []sdk.Target{target("a1", "https://good.test"), target("a2", "https://bad.test")}}
			for round := 1; round <= 2; round++ {
				// The round's deadline ends the polling of a result never
				// ready; its length is no assertion.
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
				votes, err := h.src.Vote(ctx, ballot)
				cancel()
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if got := strings.Join(summary(votes), "\n"); got != strings.Join(tt.wantVotes, "\n") {
					t.Fatalf("round %d votes:\n%s\nwant:\n%s", round, got, strings.Join(tt.wantVotes, "\n"))
				}
				for _, v := range votes {
					if v.Value == sdk.Abstain && (v.PluginReason != dnspup.PluginReasonPending || !strings.Contains(v.Detail, "bp_")) {
						t.Errorf("abstention %+v: want plugin reason %s and the pending id in the detail", v, dnspup.PluginReasonPending)
					}
				}
				if err := sdk.CheckVotes(ballot, votes); err != nil {
					t.Errorf("round %d: CheckVotes: %v", round, err)
				}
			}
			if got := h.src.Abstentions()["pending"]; got != 2*tt.wantPending {
				t.Errorf("abstentions[pending] = %d, want %d", got, 2*tt.wantPending)
			}
			if got := strings.Count(h.logs.String(), "202 Accepted"); tt.wantPending > 0 && got != 2 {
				t.Errorf("the pending warning was logged %d times in 2 rounds, want 2 (once per round):\n%s", got, h.logs.String())
			}
			if got := h.src.QuotaSpend()["spent"]; got != 2 || h.fake.Accepted() != 2 {
				t.Errorf("quota spent = %d (fake accepted %d), want 2: a 202 costs quota", got, h.fake.Accepted())
			}
		})
	}
}

// TestConfigureFollowsNodePages: a checkpoint listed on the last page of
// GET /v1/nodes is known.
func TestConfigureFollowsNodePages(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.SetPageSize(1)
	h.configure(t, map[string]any{"checkpoints": []string{"ams-1", "nyc-1"}})
	if got := h.fake.Count("/v1/nodes"); got != 3 {
		t.Errorf("GET /v1/nodes %d times, want 3 (three pages of one)", got)
	}
	votes, err := h.src.Vote(t.Context(), sdk.Ballot{Targets: []sdk.Target{target("a1", "https://good.test")}})
	if err != nil || strings.Join(summary(votes), ",") != "www/a1 dnspup:ams-1 up ok,www/a1 dnspup:nyc-1 up ok" {
		t.Fatalf("votes %v, err %v", summary(votes), err)
	}
}

// TestVoteRateLimitedAbstains: a request rate-limited beyond the round
// leaves its targets with dnspup/rate_limited abstentions while the rest
// of the round votes.
func TestVoteRateLimitedAbstains(t *testing.T) {
	h := newHarness(t, func(fake *fakeapi.Server) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if r.Method == http.MethodPost && strings.Contains(string(body), "limited.test") {
				w.Header().Set("Retry-After", "60")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, `{"error":{"code":"rate_limited","message":"slow down"}}`)
				return
			}
			fake.ServeHTTP(w, r)
		})
	})
	h.configure(t, map[string]any{"batch_size": 1.0, "concurrency": 1.0})
	ballot := sdk.Ballot{Targets: []sdk.Target{target("a1", "https://good.test"), target("a2", "https://limited.test")}}
	votes, err := h.src.Vote(t.Context(), ballot)
	if err != nil {
		t.Fatal(err)
	}
	want := "www/a1 dnspup:ams-1 up ok,www/a1 dnspup:fra-1 up ok,www/a2 dnspup abstain out_of_time"
	if got := strings.Join(summary(votes), ","); got != want {
		t.Fatalf("votes %s, want %s", got, want)
	}
	for _, v := range votes {
		if v.Value == sdk.Abstain && v.PluginReason != dnspup.PluginReasonRateLimited {
			t.Errorf("abstention %+v: want plugin reason %s", v, dnspup.PluginReasonRateLimited)
		}
	}
	if h.src.Abstentions()["rate_limited"] != 1 || h.src.QuotaSpend()["spent"] != 1 {
		t.Errorf("abstentions %v, quota %v; want 1 rate_limited, 1 spent", h.src.Abstentions(), h.src.QuotaSpend())
	}
}

// TestVoteRetriesWithinRound: a 429 whose Retry-After fits in the round,
// and a 503 service_unavailable, are retried in the same round (backoff,
// within the deadline) and the round votes.
func TestVoteRetriesWithinRound(t *testing.T) {
	tests := []struct {
		code       string
		retryAfter time.Duration
	}{
		{"rate_limited", time.Second},
		{"service_unavailable", 0},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			h := newHarness(t, nil)
			log := hclog.New(&hclog.LoggerOptions{Output: h.logs, Level: hclog.Trace, JSONFormat: true})
			h.src = dnspup.New(log, dnspup.Options{
				Getenv: func(k string) string { return h.env[k] }, Now: h.clock.Now,
				RetryWaitMax: 3 * time.Second, // lets a 1s Retry-After be waited for in the call
			})
			h.configure(t, nil)
			h.fake.FailNext(tt.code, tt.retryAfter, 1)
			// A generous deadline: it only catches a hang.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			votes, err := h.src.Vote(ctx, sdk.Ballot{Targets: []sdk.Target{target("a1", "https://good.test")}})
			if err != nil || len(votes) != 2 {
				t.Fatalf("votes %v, err %v; want 2 votes after the retry", summary(votes), err)
			}
			if got := h.fake.Count("/v1/batch-probes"); got != 2 {
				t.Errorf("POSTs = %d, want 2 (one refused, one retried)", got)
			}
			if got := h.src.QuotaSpend()["spent"]; got != 1 {
				t.Errorf("quota spent = %d, want 1 (the refused POST cost nothing)", got)
			}
		})
	}
}
