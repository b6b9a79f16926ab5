package direct_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/direct"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

func server(t *testing.T, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "www.example.com" || r.URL.Path != "/health" {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// refused returns the address of a loopback port with no listener.
func refused(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func target(origin, address string) sdk.Target {
	return sdk.Target{Site: "www", Origin: origin, Address: address, Host: "www.example.com", Path: "/health", Timeout: 5 * time.Second}
}

func TestVotes(t *testing.T) {
	ballot := sdk.Ballot{Round: 1, Targets: []sdk.Target{
		target("ok", server(t, 200)),
		target("notfound", server(t, 404)),
		target("broken", server(t, 503)),
		target("refused", refused(t)),
		target("invalid", "ftp://example.com"),
	}}
	want := map[string]struct {
		value  sdk.Value
		reason sdk.Reason
	}{
		"ok":       {sdk.Up, sdk.ReasonOK},
		"notfound": {sdk.Up, sdk.ReasonOK},
		"broken":   {sdk.Down, sdk.ReasonHTTP5xx},
		"refused":  {sdk.Down, sdk.ReasonConnectFailed},
		"invalid":  {sdk.Abstain, sdk.ReasonUnsupported},
	}
	for _, tc := range []struct {
		name string
		src  func(t *testing.T) sdk.VoteSource
	}{
		{"library", func(t *testing.T) sdk.VoteSource { return direct.New(nil) }},
		{"subprocess", func(t *testing.T) sdk.VoteSource {
			return sdktest.Launch(t, sdktest.Build(t, "./cmd/vigil-source-direct"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src(t)
			sdktest.Configure(t, src, sdk.Config{Values: map[string]any{"concurrency": 2.0}})
			votes, err := src.Vote(context.Background(), ballot)
			if err != nil {
				t.Fatal(err)
			}
			sdktest.CheckVotes(t, ballot, votes)
			if len(votes) != len(want) {
				t.Errorf("%d votes, want %d (an abstention for the invalid target): %+v", len(votes), len(want), votes)
			}
			for _, v := range votes {
				w, ok := want[v.Origin]
				if !ok {
					t.Errorf("unexpected vote %+v", v)
					continue
				}
				if v.Value != w.value || v.Reason != w.reason || v.Voter != "direct" {
					t.Errorf("vote for %s = %v %v by %q (%s), want %v %v", v.Origin, v.Value, v.Reason, v.Voter, v.Detail, w.value, w.reason)
				}
			}
		})
	}
}

func TestConcurrencyIsBounded(t *testing.T) {
	const limit, targets = 3, 30
	var inflight, peak atomic.Int64
	gate := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if n >= limit {
			once.Do(func() { close(gate) })
		}
		select { // hold the first probes until the pool is full
		case <-gate:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	src := direct.New(nil)
	if err := src.Configure(context.Background(), sdk.Config{Values: map[string]any{"concurrency": float64(limit)}}); err != nil {
		t.Fatal(err)
	}
	ballot := sdk.Ballot{}
	for i := range targets {
		ballot.Targets = append(ballot.Targets, target(string(rune('a'+i)), srv.URL))
	}
	votes, err := src.Vote(context.Background(), ballot)
	if err != nil {
		t.Fatal(err)
	}
	if len(votes) != targets {
		t.Errorf("%d votes, want %d", len(votes), targets)
	}
	if p := peak.Load(); p != limit {
		t.Errorf("peak concurrency %d, want %d", p, limit)
	}
}

func TestStopsBeforeDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("slow") != "" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	src := direct.New(nil)
	if err := src.Configure(context.Background(), sdk.Config{Values: map[string]any{"concurrency": 2.0}}); err != nil {
		t.Fatal(err)
	}
	fast, slow := target("fast", srv.URL), target("slow", srv.URL)
	slow.Path = "/health?slow=1"
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	votes, err := src.Vote(ctx, sdk.Ballot{Targets: []sdk.Target{fast, slow}})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Error("Vote returned after the call's deadline")
	}
	got := map[string]sdk.Vote{}
	for _, v := range votes {
		got[v.Origin] = v
	}
	if f := got["fast"]; len(votes) != 2 || f.Value != sdk.Up {
		t.Errorf("votes = %+v, want the fast origin up", votes)
	}
	if sl := got["slow"]; sl.Value != sdk.Abstain || sl.Reason != sdk.ReasonOutOfTime {
		t.Errorf("slow origin's vote = %+v, want an abstention out of time (not a down: its timeout did not pass)", sl)
	}
}

func TestConfigure(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		path string // attribute path of the expected diagnostic; "" = ok
	}{
		{"defaults", nil, ""},
		{"valid", map[string]any{"concurrency": 8.0, "voter": "direct-fra"}, ""},
		{"zero", map[string]any{"concurrency": 0.0}, "concurrency"},
		{"fraction", map[string]any{"concurrency": 2.5}, "concurrency"},
		{"huge", map[string]any{"concurrency": 1e6}, "concurrency"},
		{"bad voter", map[string]any{"voter": "a b"}, "voter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := direct.New(nil).Configure(context.Background(), sdk.Config{Values: tc.cfg})
			var diags sdk.Diagnostics
			switch {
			case tc.path == "" && err != nil:
				t.Errorf("Configure: %v", err)
			case tc.path != "" && (!errors.As(err, &diags) || diags[0].AttributePath != tc.path):
				t.Errorf("Configure = %v, want a diagnostic on %s", err, tc.path)
			}
		})
	}
}
