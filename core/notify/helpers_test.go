package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// wait bounds every await in these tests.
const wait = 15 * time.Second

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func openStore(t *testing.T, dir string, journal int) *store.Bolt {
	t.Helper()
	st, err := store.Open(dir, journal)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// commit appends events to the journal, numbering them after the last one.
func commit(t *testing.T, st store.Store, events ...store.Event) []store.Event {
	t.Helper()
	ctx := context.Background()
	s, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	meta := s.Meta
	meta.Round++
	for i := range events {
		meta.LastEvent++
		events[i].Seq = meta.LastEvent
		if events[i].Time.IsZero() {
			events[i].Time = t0.Add(time.Duration(meta.LastEvent) * time.Second)
		}
		if events[i].Site == "" {
			events[i].Site = "www.example.com"
		}
	}
	if err := st.Commit(ctx, store.Batch{Meta: meta, Events: events}); err != nil {
		t.Fatal(err)
	}
	return events
}

func switched(from, to int, r decide.Reason) store.Event {
	return store.Event{Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: from, ToLevel: to, Reason: r}}
}

func originState(name string, from, to decide.Health) store.Event {
	return store.Event{Event: decide.Event{Kind: decide.KindOriginState, Origin: name, From: from, To: to}}
}

func levelEvent(k decide.EventKind, level int) store.Event {
	return store.Event{Event: decide.Event{Kind: k, Level: level}}
}

func hook(name, url, format string) *config.Notifier {
	return &config.Notifier{Kind: "webhook", Name: name, URL: url, Format: format, Timeout: 5 * time.Second}
}

// request is what a receiver saw.
type request struct {
	At     time.Time
	Header http.Header
	Body   []byte
	Seq    uint64 // from a json body
}

// receiver is a webhook endpoint on loopback. respond decides the answer
// to each request (nil: 200); every request is also sent on got.
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []request
	got     chan request
	respond func(w http.ResponseWriter, r *http.Request, req request, n int) // n counts from 1
}

func newReceiver(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, req request, n int)) *receiver {
	t.Helper()
	rc := &receiver{got: make(chan request, 1000), respond: respond}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := request{At: time.Now(), Header: r.Header.Clone(), Body: body}
		var jb struct {
			Seq uint64 `json:"seq"`
		}
		if json.Unmarshal(body, &jb) == nil {
			req.Seq = jb.Seq
		}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, req)
		n := len(rc.reqs)
		rc.mu.Unlock()
		rc.got <- req
		if rc.respond != nil {
			rc.respond(w, r, req, n)
		}
	}))
	t.Cleanup(rc.Server.Close)
	return rc
}

// next waits for the receiver's next request.
func (rc *receiver) next(t *testing.T) request {
	t.Helper()
	select {
	case r := <-rc.got:
		return r
	case <-time.After(wait):
		t.Fatalf("no webhook request within %s", wait)
	}
	return request{}
}

// run starts d and stops it when the test ends (or when stop is called).
func run(t *testing.T, d *notify.Dispatcher) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(wait):
				t.Errorf("Run did not return within %s of its context ending", wait)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func newLog() (*sdktest.LogBuffer, hclog.Logger) {
	lb := &sdktest.LogBuffer{}
	return lb, hclog.New(&hclog.LoggerOptions{Output: lb, Level: hclog.Debug, JSONFormat: true})
}

// metric reads one series of the dispatcher's collectors.
func metric(t *testing.T, d *notify.Dispatcher, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range d.Collectors() {
		reg.MustRegister(c)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

// eventually polls cond (for state with no signal to await, such as a
// stored cursor) until it holds or the wait runs out.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func cursor(t *testing.T, st store.Store, name string) uint64 {
	t.Helper()
	s, err := st.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s.Cursors[name]
}

// startAt stores a cursor so a notifier starts after seq, not at the end.
func startAt(t *testing.T, st store.Store, seq uint64, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := st.SetCursor(context.Background(), n, seq); err != nil {
			t.Fatal(err)
		}
	}
}
