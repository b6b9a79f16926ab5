package nodeagent

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
)

// TestBackOffBounds: the reconnect waits grow from MinBackoff, doubling,
// are capped at MaxBackoff, each drawn between half and all of its step
// (equal jitter), and Reset starts again from MinBackoff.
func TestBackOffBounds(t *testing.T) {
	tests := []struct {
		name   string
		lo, hi time.Duration
		steps  []time.Duration
	}{
		{"defaults", DefaultMinBackoff, DefaultMaxBackoff, []time.Duration{
			500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
			30 * time.Second, 30 * time.Second, 30 * time.Second}},
		{"cap between two doublings", 10 * time.Millisecond, 50 * time.Millisecond, []time.Duration{
			10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}},
		{"min equals max", time.Second, time.Second, []time.Duration{time.Second, time.Second, time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const draws = 300
			lowest := make([]time.Duration, len(tt.steps))
			highest := make([]time.Duration, len(tt.steps))
			for range draws {
				b := newBackOff(tt.lo, tt.hi)
				for round := range 2 { // the second walk after a Reset
					for k, step := range tt.steps {
						d := b.NextBackOff()
						if d < step/2 || d > step {
							t.Fatalf("walk %d, wait %d = %v, want within [%v, %v]", round, k, d, step/2, step)
						}
						if lowest[k] == 0 || d < lowest[k] {
							lowest[k] = d
						}
						highest[k] = max(highest[k], d)
					}
					b.Reset()
				}
			}
			// The waits are spread over their range, not all alike.
			for k, step := range tt.steps {
				if lowest[k] > step*6/10 || highest[k] < step*9/10 {
					t.Errorf("wait %d over %d draws spans [%v, %v], want most of [%v, %v]", k, 2*draws, lowest[k], highest[k], step/2, step)
				}
			}
		})
	}
}

// recorder is a BackOff that records how a loop uses it and waits 1ms;
// waits gets a signal at each NextBackOff.
type recorder struct {
	mu    sync.Mutex
	calls []string
	waits chan struct{}
}

func newRecorder() *recorder { return &recorder{waits: make(chan struct{}, 1000)} }

func (r *recorder) NextBackOff() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "next")
	select {
	case r.waits <- struct{}{}:
	default:
	}
	return time.Millisecond
}

func (r *recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "reset")
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// runWith runs an agent for cfg with rec as its backoff until the test
// ends.
func runWith(t *testing.T, cfg Config, rec *recorder) {
	t.Helper()
	cfg.Log = hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard})
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.backOff = func() backoff.BackOff { return rec }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Run(ctx); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestFollowBacksOffAndResets: each failed request for the publication
// waits the next backoff; a snapshot starts the backoff again.
func TestFollowBacksOffAndResets(t *testing.T) {
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	v := cp.Publish(site(1, "http://192.0.2.1"))
	target, _ := url.Parse(cp.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var requests atomic.Int64
	applied := make(chan struct{})
	var once sync.Once
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost { // the acknowledgement of the version applied
			w.WriteHeader(http.StatusNoContent)
			return
		}
		switch requests.Add(1) {
		case 1, 2, 3:
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
		case 4:
			proxy.ServeHTTP(w, r)
		default: // the agent applied the snapshot and long-polls again
			once.Do(func() { close(applied) })
			<-r.Context().Done()
		}
	}))
	t.Cleanup(front.Close)
	rec := newRecorder()
	runWith(t, Config{ControlPlane: front.URL, PollWait: 5 * time.Second}, rec)
	select {
	case <-applied:
	case <-time.After(10 * time.Second):
		t.Fatalf("the agent did not ask again after version %d (requests %d, backoff %v)", v, requests.Load(), rec.got())
	}
	if want := []string{"next", "next", "next", "reset"}; !slices.Equal(rec.got(), want) {
		t.Errorf("backoff used as %v, want %v", rec.got(), want)
	}
}

// TestLinkBacksOffWhileUnattached: a gateway that cannot be reached is
// retried after the next backoff each time, never reset.
func TestLinkBacksOffWhileUnattached(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every attach fails at once
	rec := newRecorder()
	runWith(t, Config{Gateway: addr, ID: "n1", Token: "t"}, rec)
	timeout := time.After(time.Minute)
	for range 3 {
		select {
		case <-rec.waits:
		case <-timeout:
			t.Fatalf("backoff used as %v after 10s, want at least 3 waits", rec.got())
		}
	}
	if got := rec.got(); slices.Contains(got, "reset") {
		t.Errorf("backoff used as %v: reset without an attach", got)
	}
}
