package customerapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/dnspup/customerapi"
	"github.com/vigilcdn/vigil/plugins/dnspup/fakeapi"
)

func fiveNodes() []customerapi.Node {
	var ns []customerapi.Node
	for _, id := range []string{"sin-1", "ams-1", "nyc-1", "fra-1", "gru-1"} {
		ns = append(ns, customerapi.Node{ID: id, Online: true})
	}
	return ns
}

func clientWith(t *testing.T, base string, cfg customerapi.Config) *customerapi.Client {
	t.Helper()
	cfg.BaseURL, cfg.Key, cfg.Secret = base, customerapi.NewSecret(testKey), customerapi.NewSecret(testSecret)
	cfg.RetryWaitMin, cfg.RetryWaitMax = time.Millisecond, 50*time.Millisecond
	c, err := customerapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNodesFollowsPages(t *testing.T) {
	tests := []struct {
		pageSize, maxPages, wantCalls int
		wantErr                       string
	}{
		{0, 0, 1, ""},
		{2, 0, 3, ""},
		{1, 0, 5, ""},
		{1, 5, 5, ""},
		{1, 2, 2, "past 2 pages"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("page_size=%d,max_pages=%d", tt.pageSize, tt.maxPages), func(t *testing.T) {
			fake := fakeapi.New(fakeapi.Options{Key: testKey, Secret: testSecret, Nodes: fiveNodes(), PageSize: tt.pageSize})
			hs := httptest.NewServer(fake)
			t.Cleanup(hs.Close)
			c := clientWith(t, hs.URL, customerapi.Config{MaxPages: tt.maxPages})
			nodes, err := c.Nodes(t.Context())
			if got := fake.Count("/v1/nodes"); got != tt.wantCalls {
				t.Errorf("GET /v1/nodes %d times, want %d", got, tt.wantCalls)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "MaxPages") {
					t.Fatalf("err = %v, want one naming %q and MaxPages", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, n := range nodes {
				ids = append(ids, n.ID)
			}
			if got := strings.Join(ids, ","); got != "ams-1,fra-1,gru-1,nyc-1,sin-1" {
				t.Errorf("nodes = %s", got)
			}
		})
	}
}

// TestNodesPageShapes serves the other common pagination shapes.
func TestNodesPageShapes(t *testing.T) {
	tests := []struct {
		name    string
		pages   map[string]string // query -> body
		link    map[string]string // query -> Link header
		want    string
		wantErr string
	}{
		{"cursor under meta",
			map[string]string{"": `{"data":[{"id":"a"}],"meta":{"next_cursor":"c2"}}`, "cursor=c2": `{"data":[{"id":"b"}],"meta":{}}`},
			nil, "a,b", ""},
		{"next link in body",
			map[string]string{"": `{"nodes":[{"id":"a"}],"links":{"next":"/v1/nodes?page=2"}}`, "page=2": `{"nodes":[{"id":"b"}]}`},
			nil, "a,b", ""},
		{"link header",
			map[string]string{"": `[{"id":"b"}]`, "page=2": `[{"id":"a"},{"id":"b"}]`},
			map[string]string{"": `</v1/nodes?page=2>; rel="next"`}, "a,b", ""},
		{"a link to another host is not followed",
			map[string]string{"": `{"nodes":[{"id":"a"}],"next":"http://198.51.100.1/v1/nodes?page=2"}`},
			nil, "a", ""},
		{"a page pointing back is an error",
			map[string]string{"": `{"nodes":[{"id":"a"}],"next_cursor":"x"}`, "cursor=x": `{"nodes":[{"id":"b"}],"next_cursor":"x"}`},
			nil, "", "points back"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, ok := tt.pages[r.URL.RawQuery]
				if !ok {
					http.Error(w, `{"error":{"code":"invalid_request","message":"no such page"}}`, 400)
					return
				}
				if l := tt.link[r.URL.RawQuery]; l != "" {
					w.Header().Set("Link", l)
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, body)
			}))
			t.Cleanup(hs.Close)
			nodes, err := clientWith(t, hs.URL, customerapi.Config{}).Nodes(t.Context())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, n := range nodes {
				ids = append(ids, n.ID)
			}
			if got := strings.Join(ids, ","); got != tt.want {
				t.Errorf("nodes = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestAsyncProbeIsPolled(t *testing.T) {
	tests := []struct {
		name  string
		polls int
		batch bool
	}{
		{"probe, ready at the first poll", 1, false},
		{"probe, ready at the fourth poll", 4, false},
		{"batch, ready at the third poll", 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, base := newFake(t)
			fake.SetAsync(tt.polls)
			c := clientWith(t, base, customerapi.Config{PollInterval: time.Millisecond})
			var (
				res []customerapi.TargetResult
				err error
			)
			if tt.batch {
				res, err = c.BatchProbe(t.Context(), customerapi.BatchProbeRequest{Type: "http", Targets: []string{"http://a.test/h", "http://b.test/h"}, NodeIDs: []string{"fra-1"}})
			} else {
				var r customerapi.TargetResult
				r, err = c.Probe(t.Context(), customerapi.ProbeRequest{Type: "http", Target: "http://a.test/h", NodeIDs: []string{"fra-1"}})
				res = []customerapi.TargetResult{r}
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if len(r.Checkpoints) != 1 || r.Checkpoints[0].NodeID != "fra-1" || r.Checkpoints[0].Outcome != customerapi.OutcomeUp {
					t.Errorf("result %+v, want fra-1 up", r)
				}
			}
			path := "/v1/probes/prb_1"
			if tt.batch {
				path = "/v1/batch-probes/bp_1"
			}
			if got := fake.Count(path); got != tt.polls {
				t.Errorf("polled %d times, want %d", got, tt.polls)
			}
			if fake.Accepted() != 1 {
				t.Errorf("accepted %d requests, want 1", fake.Accepted())
			}
		})
	}
}

func TestAsyncProbeNeverReadyIsPending(t *testing.T) {
	fake, base := newFake(t)
	fake.SetAsync(fakeapi.AsyncNever)
	c := clientWith(t, base, customerapi.Config{PollInterval: time.Millisecond})
	// The context is cancelled after the second poll arrives (no clock).
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		defer cancel()
		for {
			arrived := fake.Arrived()
			if fake.Count("/v1/probes/prb_1") >= 2 {
				return
			}
			select {
			case <-arrived:
			case <-ctx.Done():
				return
			}
		}
	}()
	_, err := c.Probe(ctx, customerapi.ProbeRequest{Type: "http", Target: "http://a.test/h"})
	var pe *customerapi.PendingError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *PendingError", err)
	}
	if pe.ID != "prb_1" || pe.Polls < 2 || !errors.Is(err, context.Canceled) {
		t.Errorf("PendingError %+v (%v): want id prb_1, at least two polls, the cancellation", pe, err)
	}
	if fake.Accepted() != 1 {
		t.Errorf("accepted %d requests, want 1 (the POST is never resent)", fake.Accepted())
	}
}

// TestPollRetries5xx: a poll is a GET, so a 5xx is retried with backoff.
func TestPollRetries5xx(t *testing.T) {
	fake := fakeapi.New(fakeapi.Options{Key: testKey, Secret: testSecret,
		Probe: func(context.Context, string) fakeapi.Result { return fakeapi.Result{Status: 200} }})
	fake.SetAsync(1)
	var failed atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/probes/") && failed.Add(1) <= 2 {
			http.Error(w, `{"error":{"code":"internal_error","message":"boom"}}`, http.StatusInternalServerError)
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	c := clientWith(t, hs.URL, customerapi.Config{PollInterval: time.Millisecond})
	r, err := c.Probe(t.Context(), customerapi.ProbeRequest{Type: "http", Target: "http://a.test/h", NodeIDs: []string{"ams-1"}})
	if err != nil || len(r.Checkpoints) != 1 {
		t.Fatalf("Probe = %+v, %v; want the result after two 500s", r, err)
	}
	if got := failed.Load(); got != 3 {
		t.Errorf("%d polls, want 3 (two 500s retried)", got)
	}
}

// TestPost5xxNotRetried: a POST answered 500 may have been accepted; it is
// not resent (it would cost quota twice).
func TestPost5xxNotRetried(t *testing.T) {
	fake, base := newFake(t)
	fake.FailNext("internal_error", 0, 1)
	_, err := newClient(t, base).Probe(t.Context(), customerapi.ProbeRequest{Type: "http", Target: "http://a.test/h"})
	var ae *customerapi.Error
	if !errors.As(err, &ae) || ae.Status != 500 {
		t.Fatalf("err = %v, want HTTP 500", err)
	}
	if got := fake.Count("/v1/probes"); got != 1 {
		t.Errorf("POSTed %d times, want 1", got)
	}
}

func TestAsyncWithoutIDIsPending(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"status":"in-progress"}`)
	}))
	t.Cleanup(hs.Close)
	_, err := clientWith(t, hs.URL, customerapi.Config{}).Probe(t.Context(), customerapi.ProbeRequest{Type: "http", Target: "http://a.test/h"})
	var pe *customerapi.PendingError
	if !errors.As(err, &pe) || pe.ID != "" || pe.Polls != 0 || !strings.Contains(err.Error(), "without an id") {
		t.Fatalf("err = %v, want a *PendingError saying there is no id", err)
	}
}
