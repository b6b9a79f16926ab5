package proxy

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// backend is a test origin that counts its requests and records bodies.
type backend struct {
	name   string
	srv    *httptest.Server
	hits   atomic.Int64
	status atomic.Int64
	bodies chan string
}

func newBackend(t *testing.T, name string, status int) *backend {
	t.Helper()
	b := &backend{name: name, bodies: make(chan string, 16)}
	b.status.Store(int64(status))
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		select {
		case b.bodies <- string(body):
		default:
		}
		w.Header().Set("X-Origin", b.name)
		w.WriteHeader(int(b.status.Load()))
		_, _ = io.WriteString(w, b.name+" saw host "+r.Host)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// deadAddress returns an http URL where nothing listens.
func deadAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr
}

func snapshot(origins ...publication.Origin) *publication.Snapshot {
	return &publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1, Origins: origins}}}
}

type harness struct {
	p      *Proxy
	url    string       // where the proxy listens: http://127.0.0.1:port
	client *http.Client // keeps its connections alive
	server *Server      // nil behind httptest's http.Server
	clock  *fakeClock
	reg    *prometheus.Registry
}

// newHarness serves a proxy as vigil-node does: on its Server.
func newHarness(t *testing.T, opts Options, snap *publication.Snapshot) *harness {
	return newHarnessOn(t, opts, snap, true)
}

// newHarnessOn serves the proxy on its Server (onServer) or as an
// http.Handler behind httptest's http.Server.
func newHarnessOn(t *testing.T, opts Options, snap *publication.Snapshot, onServer bool) *harness {
	t.Helper()
	h := &harness{clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}, reg: prometheus.NewRegistry()}
	opts.Now, opts.Registerer = h.clock.Now, h.reg
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if snap != nil {
		p.SetSnapshot(snap)
	}
	h.p = p
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	h.client = &http.Client{Transport: tr}
	if !onServer {
		srv := httptest.NewServer(p)
		t.Cleanup(srv.Close)
		h.url = srv.URL
		return h
	}
	h.server = p.NewServer(0, 0)
	h.url = "http://" + serveRaw(t, h.server)
	return h
}

// serveRaw runs s on a loopback port until the test ends.
func serveRaw(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the proxy server: %v", err)
		}
		if err := <-done; err != http.ErrServerClosed {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

func (h *harness) do(t *testing.T, method, host, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, h.url+"/page", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		req.Body = http.NoBody
	}
	req.Host = host
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestUnknownHostAndNoPublication(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	resp, body := h.do(t, "GET", "www.example.com", "")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "no publication yet") {
		t.Errorf("before a publication: %d %q", resp.StatusCode, body)
	}
	h.p.SetSnapshot(snapshot(publication.Origin{Name: "a1", Address: newBackend(t, "a1", 200).srv.URL}))
	resp, body = h.do(t, "GET", "other.example.com", "")
	if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(body, `"other.example.com"`) {
		t.Errorf("unknown host: %d %q", resp.StatusCode, body)
	}
	resp, body = h.do(t, "GET", "WWW.example.com.:8080", "")
	if resp.StatusCode != 200 || !strings.Contains(body, "a1 saw host WWW.example.com.:8080") {
		t.Errorf("known host (case, port, dot): %d %q", resp.StatusCode, body)
	}
}

// TestPassiveSkipAndExpiry: an origin failing fail_count times within
// fail_window is skipped for skip_for, then used again.
func TestPassiveSkipAndExpiry(t *testing.T) {
	bad, good := newBackend(t, "bad", 503), newBackend(t, "good", 200)
	h := newHarness(t, Options{FailCount: 3, FailWindow: 10 * time.Second, SkipFor: 30 * time.Second, Retries: NoRetries},
		snapshot(publication.Origin{Name: "bad", Address: bad.srv.URL}, publication.Origin{Name: "good", Address: good.srv.URL}))

	// Round-robin: bad gets every other request until its third failure.
	for bad.hits.Load() < 3 {
		h.do(t, "GET", "www.example.com", "")
		if good.hits.Load() > 10 {
			t.Fatal("bad origin never chosen")
		}
	}
	for range 6 {
		if resp, _ := h.do(t, "GET", "www.example.com", ""); resp.StatusCode != 200 {
			t.Errorf("request during the skip: %d", resp.StatusCode)
		}
	}
	if n := bad.hits.Load(); n != 3 {
		t.Errorf("skipped origin got %d requests, want 3", n)
	}
	if v := counter(t, h.p.m.skips.WithLabelValues("www", "bad")); v != 1 {
		t.Errorf("skips metric %v, want 1", v)
	}
	if v := counter(t, h.p.m.originErrors.WithLabelValues("www", "bad", "http_503")); v != 3 {
		t.Errorf("origin errors metric %v, want 3", v)
	}

	h.clock.Add(30 * time.Second) // the skip expires
	for range 4 {
		h.do(t, "GET", "www.example.com", "")
	}
	if n := bad.hits.Load(); n == 3 {
		t.Error("origin still skipped after skip_for")
	}
}

// TestFailuresOutsideWindowDoNotSkip: failures spread wider than
// fail_window never add up to a skip.
func TestFailuresOutsideWindowDoNotSkip(t *testing.T) {
	bad := newBackend(t, "bad", 502)
	h := newHarness(t, Options{FailCount: 2, FailWindow: time.Second, SkipFor: time.Minute, Retries: NoRetries},
		snapshot(publication.Origin{Name: "bad", Address: bad.srv.URL}))
	for range 3 {
		h.do(t, "GET", "www.example.com", "")
		h.clock.Add(2 * time.Second)
	}
	if v := counter(t, h.p.m.skips.WithLabelValues("www", "bad")); v != 0 {
		t.Errorf("skipped %v times, want 0", v)
	}
}

// TestRetry: which failures are retried on the other origin and which are not.
func TestRetry(t *testing.T) {
	tests := []struct {
		name       string
		first      func(t *testing.T) string // address of the origin tried first
		method     string
		body       string
		maxBody    int64
		wantStatus int
		wantRetry  bool
	}{
		{name: "GET after 503", first: status(503), method: "GET", wantStatus: 200, wantRetry: true},
		{name: "GET after 502", first: status(502), method: "GET", wantStatus: 200, wantRetry: true},
		{name: "GET after 504", first: status(504), method: "GET", wantStatus: 200, wantRetry: true},
		{name: "HEAD after connection refused", first: deadAddress, method: "HEAD", wantStatus: 200, wantRetry: true},
		{name: "GET after timeout", first: hang, method: "GET", wantStatus: 200, wantRetry: true},
		{name: "PUT body replayed", first: status(503), method: "PUT", body: "payload", wantStatus: 200, wantRetry: true},
		{name: "DELETE after 503", first: status(503), method: "DELETE", wantStatus: 200, wantRetry: true},
		{name: "GET after 500 is not a failure", first: status(500), method: "GET", wantStatus: 500},
		{name: "POST never retried", first: status(503), method: "POST", body: "order=1", wantStatus: 503},
		{name: "POST connection refused not retried", first: deadAddress, method: "POST", body: "order=1", wantStatus: 502},
		{name: "PATCH never retried", first: status(503), method: "PATCH", body: "x", wantStatus: 503},
		{name: "PUT body too large to replay", first: status(503), method: "PUT", body: strings.Repeat("x", 100), maxBody: 10, wantStatus: 503},
	}
	for _, onServer := range []bool{true, false} {
		for _, tt := range tests {
			name := "server/" + tt.name
			if !onServer {
				name = "handler/" + tt.name
			}
			t.Run(name, func(t *testing.T) {
				testRetry(t, onServer, tt.first, tt.method, tt.body, tt.maxBody, tt.wantStatus, tt.wantRetry)
			})
		}
	}
}

// testRetry sends one request to a proxy whose first pick is first and
// whose second is a good origin.
func testRetry(t *testing.T, onServer bool, first func(t *testing.T) string, method, body string, maxBody int64, wantStatus int, wantRetry bool) {
	good := newBackend(t, "good", 200)
	// The first request of a fresh proxy starts at index 1.
	h := newHarnessOn(t, Options{ResponseTimeout: 200 * time.Millisecond, MaxReplayBody: maxBody},
		snapshot(publication.Origin{Name: "good", Address: good.srv.URL}, publication.Origin{Name: "first", Address: first(t)}), onServer)
	resp, _ := h.do(t, method, "www.example.com", body)
	if resp.StatusCode != wantStatus {
		t.Errorf("status %d, want %d", resp.StatusCode, wantStatus)
	}
	retries := counter(t, h.p.m.retries.WithLabelValues("www"))
	if (retries == 1) != wantRetry || retries > 1 {
		t.Errorf("retries %v, want retry=%v", retries, wantRetry)
	}
	if wantRetry && body != "" {
		if got := <-good.bodies; got != body {
			t.Errorf("retried body %q, want %q", got, body)
		}
	}
}

func status(code int) func(t *testing.T) string {
	return func(t *testing.T) string { return newBackend(t, "first", code).srv.URL }
}

// hang is an origin that never answers (until the request is dropped).
func hang(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRetryBudget: no retry starts once the budget is spent, and retries
// stop at Retries.
func TestRetryBudget(t *testing.T) {
	t.Run("budget spent", func(t *testing.T) {
		var h *harness
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			h.clock.Add(11 * time.Second) // the attempt "took" longer than the budget
			w.WriteHeader(503)
		}))
		t.Cleanup(slow.Close)
		good := newBackend(t, "good", 200)
		h = newHarness(t, Options{RetryBudget: 10 * time.Second},
			snapshot(publication.Origin{Name: "good", Address: good.srv.URL}, publication.Origin{Name: "slow", Address: slow.URL}))
		if resp, _ := h.do(t, "GET", "www.example.com", ""); resp.StatusCode != 503 {
			t.Errorf("status %d, want the 503 passed on", resp.StatusCode)
		}
		if good.hits.Load() != 0 {
			t.Error("retried after the budget was spent")
		}
	})
	t.Run("at most Retries", func(t *testing.T) {
		a, b, c := newBackend(t, "a", 503), newBackend(t, "b", 503), newBackend(t, "c", 503)
		h := newHarness(t, Options{Retries: 1},
			snapshot(publication.Origin{Name: "a", Address: a.srv.URL}, publication.Origin{Name: "b", Address: b.srv.URL}, publication.Origin{Name: "c", Address: c.srv.URL}))
		h.do(t, "GET", "www.example.com", "")
		if n := a.hits.Load() + b.hits.Load() + c.hits.Load(); n != 2 {
			t.Errorf("%d attempts, want 2 (one retry)", n)
		}
	})
}

// TestUnhealthyOriginsAvoided: origins the control plane judges unhealthy
// get no traffic while another is available, and all of it when none is.
func TestUnhealthyOriginsAvoided(t *testing.T) {
	sick, fine := newBackend(t, "sick", 200), newBackend(t, "fine", 200)
	h := newHarness(t, Options{}, snapshot(
		publication.Origin{Name: "sick", Address: sick.srv.URL, State: "unhealthy"},
		publication.Origin{Name: "fine", Address: fine.srv.URL, State: "healthy"}))
	for range 4 {
		h.do(t, "GET", "www.example.com", "")
	}
	if sick.hits.Load() != 0 || fine.hits.Load() != 4 {
		t.Errorf("sick %d, fine %d: want 0 and 4", sick.hits.Load(), fine.hits.Load())
	}
	h.p.SetSnapshot(snapshot(publication.Origin{Name: "sick", Address: sick.srv.URL, State: "unhealthy"}))
	if resp, _ := h.do(t, "GET", "www.example.com", ""); resp.StatusCode != 200 || sick.hits.Load() != 1 {
		t.Errorf("all unhealthy: %d, sick hits %d", resp.StatusCode, sick.hits.Load())
	}
}

func TestBuffer(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		length     int64
		replayable bool
	}{
		{"small", "abc", 3, true},
		{"exactly max", "abcd", 4, true},
		{"unknown length, small", "abc", -1, true},
		{"unknown length, large", "abcdefgh", -1, false},
		{"declared large", "abcdefgh", 8, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rest, ok, err := buffer(io.NopCloser(strings.NewReader(tt.body)), tt.length, 4)
			if err != nil || ok != tt.replayable {
				t.Fatalf("replayable %v err %v, want %v", ok, err, tt.replayable)
			}
			var got bytes.Buffer
			_, _ = io.Copy(&got, rest)
			if got.String() != tt.body {
				t.Errorf("body %q after buffering, want %q", got.String(), tt.body)
			}
		})
	}
}

// counter reads a counter's value.
func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
