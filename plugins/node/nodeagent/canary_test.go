package nodeagent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/sdk/probe"
)

// heldAgent is an agent reduced to what watchHeld uses, with addr's window
// held after ten failed requests. Its canaries go to canary.
func heldAgent(t *testing.T, cfg Config, canary func(context.Context, probe.Request) (probe.Result, error)) *Agent {
	t.Helper()
	p, err := newPassive(cfg.Passive, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(servedBy(addr))
	for range 10 {
		p.record(code(500))
	}
	p.serve(servedBy("http://b:1"))
	p.result(addr) // the gateway asks for it
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	a := &Agent{cfg: cfg, log: cfg.Log, metrics: newAgentMetrics(), passive: p, published: make(chan struct{}, 1), canaryProbe: canary}
	if cfg.ControlPlane != "" {
		urls, err := ParseControlPlanes(cfg.ControlPlane)
		if err != nil {
			t.Fatal(err)
		}
		a.cp = newControlPlanes(urls, cfg.ControlPlaneToken, nil, 10*time.Second)
	}
	return a
}

// fakeOrigin answers canaries with its status and keeps their requests.
type fakeOrigin struct {
	mu     sync.Mutex
	status int
	got    []probe.Request
}

func (f *fakeOrigin) set(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = status
}

func (f *fakeOrigin) sent() []probe.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]probe.Request(nil), f.got...)
}

func (f *fakeOrigin) probe(_ context.Context, r probe.Request) (probe.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, r)
	return probe.Result{Up: f.status < 500, Status: f.status}, nil
}

// runHeld runs a.watchHeld until the test's bubble ends.
func runHeld(t *testing.T, a *Agent) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.watchHeld(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// One canary per interval goes to a held window's origin, with the site's
// Host; failures keep the window held (and voting down), and two successes
// in a row clear it, after which no canary is sent.
func TestCanaryLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		origin := &fakeOrigin{status: 500}
		a := heldAgent(t, Config{CanaryInterval: 5 * time.Second}, origin.probe)
		runHeld(t, a)

		time.Sleep(3*5*time.Second + time.Second)
		synctest.Wait()
		sent := origin.sent()
		if len(sent) != 3 {
			t.Fatalf("%d canaries in 3 intervals, want 3", len(sent))
		}
		if r := sent[0]; r.Address != addr || r.Host != "www.example.com" || r.Path != CanaryPath || r.UserAgent != CanaryUserAgent || len(r.Header) != 0 {
			t.Fatalf("canary %+v: want a plain GET of %s%s with Host www.example.com", r, addr, CanaryPath)
		}
		eq(t, a.passive.result(addr), &pb.PassiveResult{Requests: 13, Failures: 13})
		if got := testutil.ToFloat64(a.metrics.held); got != 1 {
			t.Fatalf("vigil_node_passive_held = %v, want 1", got)
		}
		if got := testutil.ToFloat64(a.metrics.canaries.WithLabelValues("failed")); got != 3 {
			t.Fatalf("failed canaries counted %v, want 3", got)
		}

		origin.set(200) // the origin recovers
		time.Sleep(2 * 5 * time.Second)
		synctest.Wait()
		if r := a.passive.result(addr); r != nil {
			t.Fatalf("window after two good canaries = %v, want cleared", r)
		}
		if got := testutil.ToFloat64(a.metrics.held); got != 0 {
			t.Fatalf("vigil_node_passive_held = %v, want 0", got)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(origin.sent()); n != 5 {
			t.Fatalf("%d canaries in all, want 5: none once the window is cleared", n)
		}
	})
}

// With NoCanaries a held window is never canaried and keeps what real
// traffic last said.
func TestCanaryOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		origin := &fakeOrigin{status: 200}
		a := heldAgent(t, Config{CanaryInterval: NoCanaries}, origin.probe)
		runHeld(t, a)
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(origin.sent()); n != 0 {
			t.Fatalf("%d canaries with NoCanaries", n)
		}
		eq(t, a.passive.result(addr), &pb.PassiveResult{Requests: 10, Failures: 10})
	})
}

// A real canary: a GET of / with the site's Host and the canary's
// User-Agent, no cookie or credentials, judged as a request of real
// traffic is (5xx and refused connections fail; a 404 succeeds).
func TestCanaryRequest(t *testing.T) {
	var mu sync.Mutex
	status := http.StatusInternalServerError
	var seen []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Clone(context.Background()))
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	refused := httptest.NewServer(http.NotFoundHandler())
	refused.Close()

	cfg := Config{CanaryInterval: time.Second}
	a := heldAgent(t, cfg, probe.Do)
	for _, address := range []string{srv.URL, refused.URL} {
		a.passive.serve(servedBy(address))
		for range 6 {
			a.passive.record(proxy500(address))
		}
	}
	a.passive.serve(servedBy("http://b:1"))
	ctx := context.Background()
	a.canary(ctx, canaryTarget{address: srv.URL, host: "www.example.com", path: "/news/a b?"})
	a.canary(ctx, canaryTarget{address: refused.URL, host: "www.example.com"})
	eq(t, a.passive.result(srv.URL), &pb.PassiveResult{Requests: 7, Failures: 7})
	eq(t, a.passive.result(refused.URL), &pb.PassiveResult{Requests: 7, Failures: 7, Timeouts: 1})

	mu.Lock()
	status = http.StatusNotFound
	mu.Unlock()
	a.canary(ctx, canaryTarget{address: srv.URL, host: "www.example.com"})
	if !isHeld(a.passive, srv.URL) {
		t.Fatal("one good canary cleared the window")
	}
	a.canary(ctx, canaryTarget{address: srv.URL, host: "www.example.com"})
	if isHeld(a.passive, srv.URL) || a.passive.result(srv.URL) != nil {
		t.Fatal("two good canaries in a row did not clear the window")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("the origin saw %d canaries, want 3", len(seen))
	}
	if p := seen[0].URL.Path; p != "/news/a b?" {
		t.Fatalf("the canary of a failed path asked for %q, want it as the visitor did", p)
	}
	for _, r := range seen {
		if r.Method != http.MethodGet || r.Host != "www.example.com" || r.URL.RawQuery != "" ||
			r.UserAgent() != CanaryUserAgent || r.Header.Get("Cookie") != "" || r.Header.Get("Authorization") != "" {
			t.Fatalf("canary %s %s Host %q UA %q headers %v", r.Method, r.URL, r.Host, r.UserAgent(), r.Header)
		}
	}
	if got := testutil.ToFloat64(a.metrics.canaries.WithLabelValues("ok")); got != 2 {
		t.Fatalf("good canaries counted %v, want 2", got)
	}
}

func proxy500(address string) proxy.Attempt { return proxy.Attempt{Address: address, Status: 500} }

// A held window is forgotten when GET /v1/sites no longer lists its origin
// (in any level of any site, or only disabled), and kept while it does or
// while the configuration cannot be read.
func TestPruneHeld(t *testing.T) {
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	a := heldAgent(t, Config{ControlPlane: cp.URL(), CanaryInterval: NoCanaries}, nil)
	ctx := context.Background()
	site := func(state string) []map[string]any {
		return []map[string]any{{"site": "www", "origins": map[string]any{
			"a1": map[string]any{"level": 1, "address": addr, "state": state},
			"b1": map[string]any{"level": 2, "address": "http://b:1", "state": "healthy"},
		}}}
	}
	for _, step := range []struct {
		name  string
		sites any // nil: GET /v1/sites answers 404
		held  bool
	}{
		{"configuration unreadable: kept", nil, true},
		{"still configured on level 1: kept", site("unhealthy"), true},
		{"disabled: forgotten", site("disabled"), false},
	} {
		if step.sites != nil {
			if err := cp.SetSites(step.sites); err != nil {
				t.Fatal(err)
			}
		}
		a.pruneHeld(ctx)
		if got := isHeld(a.passive, addr); got != step.held {
			t.Fatalf("%s: held = %v, want %v", step.name, got, step.held)
		}
	}
}

// Held windows saved and read back are held again, with their attempts
// (at most the window's size) and hosts; attempts of an unknown kind are
// left out, and a window of an origin that has one already is not
// replaced.
func TestHeldSaveRestore(t *testing.T) {
	p, _ := newTestPassive(t, PassiveConfig{Window: 20})
	p.serve(servedBy(addr, "http://live:1"))
	for range 30 {
		p.record(code(500))
	}
	p.record(proxy.Attempt{Address: addr, Err: "timeout", Method: "GET", Path: "/slow"})
	p.serve(servedBy("http://live:1"))
	p.result(addr) // asked for: canaried, also after a restart
	held, gen := p.heldState()
	if len(held) != 1 || gen == 0 {
		t.Fatalf("heldState = %+v, generation %d", held, gen)
	}
	dir := t.TempDir()
	if err := saveHeld(dir, held); err != nil {
		t.Fatal(err)
	}
	back, err := loadHeld(dir)
	if err != nil {
		t.Fatal(err)
	}
	back = append(back, heldWindow{Address: "http://odd:1", Attempts: []heldAttempt{{At: 1, Kind: "exploded"}}})

	q, _ := newTestPassive(t, PassiveConfig{Window: 10})
	if n := q.restore(back); n != 1 {
		t.Fatalf("restored %d windows, want 1 (the one with no known attempt left out)", n)
	}
	if got := q.canaryTargets(); len(got) != 1 || got[0].host != "www.example.com" || got[0].path != "/slow" {
		t.Fatalf("restored canary targets %+v, want %s with its host and failed path", got, addr)
	}
	eq(t, q.result(addr), &pb.PassiveResult{Requests: 10, Failures: 10, Timeouts: 1})
	if n := q.restore(back); n != 0 {
		t.Fatalf("restored %d windows over existing ones", n)
	}
	if none, err := loadHeld(t.TempDir()); none != nil || err != nil {
		t.Fatalf("loadHeld of an empty directory = %v, %v", none, err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, HeldFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := loadHeld(bad); got != nil || err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("loadHeld of a damaged file = %v, %v; want an error saying what to do", got, err)
	}
}

// The held windows reach the state directory when they change: held after
// a publication, gone once canaries cleared them.
func TestHeldSaved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		origin := &fakeOrigin{status: 500}
		a := heldAgent(t, Config{CanaryInterval: 5 * time.Second, StateDir: dir}, origin.probe)
		runHeld(t, a)
		a.heldChanged()
		synctest.Wait()
		held, err := loadHeld(dir)
		if err != nil || len(held) != 1 || held[0].Address != addr || len(held[0].Attempts) != 10 {
			t.Fatalf("saved %+v, %v; want %s's window", held, err, addr)
		}
		origin.set(200)
		time.Sleep(2*5*time.Second + time.Second)
		synctest.Wait()
		held, err = loadHeld(dir)
		if err != nil || held == nil || len(held) != 0 {
			t.Fatalf("saved %+v, %v; want no window once cleared", held, err)
		}
	})
}

// A restarted node holds what it held: the origin it failed over from
// still has its window, from the state directory.
func TestHeldSurvivesRestart(t *testing.T) {
	var sick atomic.Bool
	gray := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sick.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(gray.Close)
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	v1 := cp.Publish(site(1, gray.URL))
	dir := t.TempDir()
	// The gateway is never reached; the node keeps windows as one that
	// probes does.
	cfg := Config{Gateway: "127.0.0.1:9", ID: "edge-1", Token: "t", ControlPlane: cp.URL(), StateDir: dir, CanaryInterval: NoCanaries}
	first := startAgent(t, cfg)
	first.await(t, EventPublication, v1)
	sick.Store(true)
	for range 10 {
		if code, _ := get(t, first); code != 500 {
			t.Fatalf("visitor got %d, want the origin's 500", code)
		}
	}
	v2 := cp.Publish(site(2, named(t, "level-2")))
	first.await(t, EventPublication, v2)
	deadline := time.Now().Add(time.Minute) // catches a hang only
	for {
		if held, _ := loadHeld(dir); len(held) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the held window never reached the state directory")
		}
		time.Sleep(10 * time.Millisecond)
	}
	first.stop()

	second := startAgent(t, cfg) // serving the saved publication v2 once it listens
	if got := second.a.Snapshot(); got == nil || got.Version != v2 {
		t.Fatalf("restarted node serves %+v, want version %d", got, v2)
	}
	eq(t, second.a.passive.result(gray.URL), &pb.PassiveResult{Requests: 10, Failures: 10})
	if !isHeld(second.a.passive, gray.URL) {
		t.Fatal("the restarted node does not hold the window")
	}
}

// A negative CanaryInterval other than NoCanaries is refused.
func TestCanaryIntervalInvalid(t *testing.T) {
	_, err := New(Config{ControlPlane: "http://127.0.0.1:1", CanaryInterval: -5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "-canary-interval") {
		t.Fatalf("New with CanaryInterval -5s: %v, want an error naming -canary-interval", err)
	}
	if _, err := New(Config{ControlPlane: "http://127.0.0.1:1", CanaryInterval: NoCanaries}); err != nil {
		t.Fatalf("New with NoCanaries: %v", err)
	}
}
