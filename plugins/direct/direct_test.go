package direct_test

import (
	"context"
	"encoding/pem"
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
	// 4s: the source stops a tenth before it (400 ms of margin, which a
	// loaded machine keeps), and the slow probe's 5s timeout has not passed.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
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

// TestTargetSettingsReachTheProbe: a private CA named by the ballot, a TLS
// server name and extra headers are what the probe uses.
func TestTargetSettingsReachTheProbe(t *testing.T) {
	var gotHeader atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader.Store(r.Header.Get("X-Health-Token"))
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	tg := target("tls", srv.URL)
	tg.Host = "www.other.test" // the test server's certificate names example.com
	tg.TLS = sdk.TLSSettings{ServerName: "example.com", CA: "bundle-1"}
	tg.Headers = map[string]string{"X-Health-Token": "s3cret"}
	for _, tc := range []struct {
		name   string
		cas    map[string][]byte
		mutate func(*sdk.Target)
		want   sdk.Value
		reason sdk.Reason
	}{
		{"private CA and server name", map[string][]byte{"bundle-1": ca}, nil, sdk.Up, sdk.ReasonOK},
		{"no CA bundle: the system's roots refuse it", nil, nil, sdk.Down, sdk.ReasonTLSFailed},
		{"no server name: the certificate does not name the site", map[string][]byte{"bundle-1": ca}, func(t *sdk.Target) { t.TLS.ServerName = "" }, sdk.Down, sdk.ReasonTLSFailed},
		{"verification off", nil, func(t *sdk.Target) { t.TLS = sdk.TLSSettings{InsecureSkipVerify: true} }, sdk.Up, sdk.ReasonOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotHeader.Store("")
			tt := tg
			if tc.mutate != nil {
				tc.mutate(&tt)
			}
			src := direct.New(nil)
			votes, err := src.Vote(context.Background(), sdk.Ballot{Targets: []sdk.Target{tt}, CAs: tc.cas})
			if err != nil || len(votes) != 1 {
				t.Fatalf("votes %+v, %v", votes, err)
			}
			if v := votes[0]; v.Value != tc.want || v.Reason != tc.reason {
				t.Fatalf("vote %v %v (%s), want %v %v", v.Value, v.Reason, v.Detail, tc.want, tc.reason)
			}
			if tc.want == sdk.Up && gotHeader.Load() != "s3cret" {
				t.Fatalf("the origin got X-Health-Token %q", gotHeader.Load())
			}
		})
	}
}
