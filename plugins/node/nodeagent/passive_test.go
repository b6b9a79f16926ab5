package nodeagent

import (
	"slices"
	"testing"
	"time"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/sdk/publication"
)

const addr = "http://127.0.0.1:18001"

func newTestPassive(t *testing.T, cfg PassiveConfig) (*passive, *time.Time) {
	t.Helper()
	now := time.Unix(1000, 0)
	p, err := newPassive(cfg, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	return p, &now
}

func code(c int) proxy.Attempt { return proxy.Attempt{Address: addr, Status: c} }

func eq(t *testing.T, got *pb.PassiveResult, want *pb.PassiveResult) {
	t.Helper()
	if got.GetRequests() != want.GetRequests() || got.GetFailures() != want.GetFailures() || got.GetIgnored() != want.GetIgnored() ||
		got.GetSlow() != want.GetSlow() || got.GetTimeouts() != want.GetTimeouts() {
		t.Fatalf("window = %v, want %v", got, want)
	}
}

// The window holds the last Window requests: older ones fall out.
func TestPassiveWindowCount(t *testing.T) {
	p, _ := newTestPassive(t, PassiveConfig{Window: 20})
	if r := p.result(addr); r != nil {
		t.Fatalf("empty window = %v, want nil", r)
	}
	for range 10 {
		p.record(code(500))
	}
	eq(t, p.result(addr), &pb.PassiveResult{Requests: 10, Failures: 10})
	for range 15 {
		p.record(code(200))
	}
	eq(t, p.result(addr), &pb.PassiveResult{Requests: 20, Failures: 5})
	for range 40 {
		p.record(code(200))
	}
	eq(t, p.result(addr), &pb.PassiveResult{Requests: 20})
	if r := p.result("http://other:80"); r != nil {
		t.Fatalf("another origin's window = %v, want nil", r)
	}
}

// Requests older than Age leave the window, whichever comes first.
func TestPassiveWindowAge(t *testing.T) {
	p, now := newTestPassive(t, PassiveConfig{Window: 20, Age: 30 * time.Second})
	for range 5 {
		p.record(code(502))
	}
	*now = now.Add(20 * time.Second)
	for range 3 {
		p.record(code(200))
	}
	eq(t, p.result(addr), &pb.PassiveResult{Requests: 8, Failures: 5})
	*now = now.Add(15 * time.Second) // the 502s are 35s old
	eq(t, p.result(addr), &pb.PassiveResult{Requests: 3})
	*now = now.Add(30 * time.Second)
	if r := p.result(addr); r != nil {
		t.Fatalf("aged-out window = %v, want nil", r)
	}
}

// 429 and 503 with Retry-After are ignored by default; a bare 503 fails;
// timeouts and connection errors fail and are counted as timeouts.
func TestPassiveIgnoredStatuses(t *testing.T) {
	p, _ := newTestPassive(t, PassiveConfig{})
	p.record(code(429))
	p.record(proxy.Attempt{Address: addr, Status: 503, RetryAfter: true})
	p.record(code(503))
	p.record(code(500))
	p.record(proxy.Attempt{Address: addr, Err: "timeout"})
	p.record(proxy.Attempt{Address: addr, Err: "connect_error"})
	p.record(code(404))
	eq(t, p.result(addr), &pb.PassiveResult{Requests: 7, Ignored: 2, Failures: 4, Timeouts: 2})

	none, err := ParsePassiveIgnore("none")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := newTestPassive(t, PassiveConfig{Ignore: none})
	q.record(code(429))
	q.record(proxy.Attempt{Address: addr, Status: 503, RetryAfter: true})
	eq(t, q.result(addr), &pb.PassiveResult{Requests: 2, Failures: 1})

	for _, bad := range []string{"abc", "42", "503-retry", "700"} {
		if _, err := ParsePassiveIgnore(bad); err == nil {
			t.Errorf("ParsePassiveIgnore(%q) = nil error", bad)
		}
	}
	list, err := ParsePassiveIgnore(" 429, 500-Retry-After ")
	if err != nil || len(list) != 2 || list[1] != "500-retry-after" {
		t.Fatalf("ParsePassiveIgnore = %q, %v", list, err)
	}
}

// With Slow set, a late answer is slow (a soft failure), a late 5xx still a
// failure; without it latency does not count.
func TestPassiveSlow(t *testing.T) {
	p, _ := newTestPassive(t, PassiveConfig{Slow: 100 * time.Millisecond})
	p.record(proxy.Attempt{Address: addr, Status: 200, Latency: 300 * time.Millisecond})
	p.record(proxy.Attempt{Address: addr, Status: 200, Latency: 50 * time.Millisecond})
	p.record(proxy.Attempt{Address: addr, Status: 500, Latency: 300 * time.Millisecond})
	eq(t, p.result(addr), &pb.PassiveResult{Requests: 3, Slow: 1, Failures: 1})

	q, _ := newTestPassive(t, PassiveConfig{})
	q.record(proxy.Attempt{Address: addr, Status: 200, Latency: time.Hour})
	eq(t, q.result(addr), &pb.PassiveResult{Requests: 1})
}

// servedBy is what serve takes when addresses are served by www.example.com.
func servedBy(addresses ...string) map[string][]string {
	m := map[string][]string{}
	for _, a := range addresses {
		m[a] = []string{"www.example.com"}
	}
	return m
}

// held says whether address's window is held.
func isHeld(p *passive, address string) bool {
	p.mu.RLock()
	w := p.m[address]
	p.mu.RUnlock()
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held
}

// The window of an origin that leaves the publication without a failure is
// forgotten; one with a failure within the age is held.
func TestPassiveServe(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attempts []int // statuses, 0: a timeout
		gap      time.Duration
		held     bool
	}{
		{"all good: forgotten", []int{200, 200, 404}, 0, false},
		{"one 5xx: held", []int{200, 500, 200}, 0, true},
		{"timeouts: held", []int{0, 0}, 0, true},
		{"ignored only: forgotten", []int{429, 429}, 0, false},
		{"failures older than the age: forgotten", []int{500, 500}, time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, now := newTestPassive(t, PassiveConfig{})
			p.serve(servedBy(addr))
			for _, c := range tc.attempts {
				if c == 0 {
					p.record(proxy.Attempt{Address: addr, Err: "timeout"})
				} else {
					p.record(code(c))
				}
			}
			*now = now.Add(tc.gap)
			p.serve(servedBy("http://x:1"))
			if got := isHeld(p, addr); got != tc.held {
				t.Fatalf("held = %v, want %v", got, tc.held)
			}
			if r := p.result(addr); (r != nil) != tc.held {
				t.Fatalf("result = %v, want a window only when held", r)
			}
		})
	}
}

// A held window survives further publications and does not age out while
// its origin is not served: it keeps saying what real traffic last saw.
// Served again, it is a live window, aged by the clock.
func TestPassiveHeldDoesNotAgeOut(t *testing.T) {
	p, now := newTestPassive(t, PassiveConfig{Window: 20, Age: 30 * time.Second})
	p.serve(servedBy(addr))
	for range 5 {
		p.record(code(200))
	}
	for range 15 {
		p.record(code(500))
	}
	want := &pb.PassiveResult{Requests: 20, Failures: 15}
	p.serve(servedBy("http://b:1")) // the failover
	eq(t, p.result(addr), want)
	*now = now.Add(time.Hour)
	p.serve(servedBy("http://b:1", "http://c:1")) // another publication
	eq(t, p.result(addr), want)
	if !isHeld(p, addr) {
		t.Fatal("the window is no longer held")
	}
	p.serve(servedBy(addr)) // served again: live, and its attempts are an hour old
	if isHeld(p, addr) {
		t.Fatal("a served origin's window is still held")
	}
	if r := p.result(addr); r != nil {
		t.Fatalf("live window of hour-old attempts = %v, want none", r)
	}
}

// During a failback ramp the level being left still serves: its origins'
// windows stay live. When the ramp is over, a window without failures is
// forgotten.
func TestPassiveKeepRamp(t *testing.T) {
	snap := &publication.Snapshot{Version: 2, Format: publication.FormatRamp, Sites: []publication.Site{{
		Name: "www", Hostname: "www.example.com", Level: 1, Origins: []publication.Origin{{Name: "a1", Address: "http://a:1"}},
		Ramp: &publication.Ramp{Weight: 25, From: 2, FromOrigins: []publication.Origin{{Name: "b1", Address: addr}}}}}}
	p, _ := newTestPassive(t, PassiveConfig{})
	p.record(code(200))
	p.serve(served(snap))
	eq(t, p.result(addr), &pb.PassiveResult{Requests: 1})
	if isHeld(p, addr) {
		t.Fatal("the window of the level being left is held during the ramp")
	}
	snap.Sites[0].Ramp = nil // the ramp is over
	p.serve(served(snap))
	if r := p.result(addr); r != nil {
		t.Fatalf("window of the level left = %v", r)
	}
}

// The backup level's origins may get real requests (the proxy falls back
// to them): their windows stay live.
func TestPassiveServedBackup(t *testing.T) {
	snap := &publication.Snapshot{Version: 3, Sites: []publication.Site{{
		Name: "www", Hostname: "www.example.com", Level: 1, Origins: []publication.Origin{{Name: "a1", Address: "http://a:1"}},
		Backup: &publication.Backup{Level: 2, Origins: []publication.Origin{{Name: "b1", Address: addr}}}}}}
	p, now := newTestPassive(t, PassiveConfig{Age: 30 * time.Second})
	p.record(code(500))
	p.serve(served(snap))
	if isHeld(p, addr) {
		t.Fatal("a backup origin's window is held")
	}
	*now = now.Add(time.Minute)
	if r := p.result(addr); r != nil {
		t.Fatalf("a backup origin's window = %v a minute later, want aged out", r)
	}
}

// A held window is forgotten when its origin leaves the configuration, and
// only then; a live window is never touched.
func TestPassiveForget(t *testing.T) {
	p, _ := newTestPassive(t, PassiveConfig{})
	live := "http://live:1"
	p.serve(servedBy(addr, live))
	p.record(code(500))
	p.record(proxy.Attempt{Address: live, Status: 500})
	p.serve(servedBy(live))
	if gone := p.forget(map[string]bool{addr: true}); len(gone) != 0 {
		t.Fatalf("forgot %v while every origin is configured", gone)
	}
	if !isHeld(p, addr) || p.held() != 1 {
		t.Fatalf("held = %v (%d), want the one window", isHeld(p, addr), p.held())
	}
	if gone := p.forget(map[string]bool{}); len(gone) != 1 || gone[0] != addr {
		t.Fatalf("forgot %v, want %s", gone, addr)
	}
	if r := p.result(addr); r != nil || p.held() != 0 {
		t.Fatalf("forgotten window = %v, %d held", r, p.held())
	}
	eq(t, p.result(live), &pb.PassiveResult{Requests: 1, Failures: 1})
}

// The canaries' bookkeeping: CanarySuccesses successes in a row clear a
// held window; a failure (slow included) starts the count again; an
// ignored status leaves it. Each canary is recorded in the window.
func TestPassiveCanaries(t *testing.T) {
	slow := proxy.Attempt{Address: addr, Status: 200, Latency: time.Second}
	ok, bad, busy := code(200), code(502), code(429)
	for _, tc := range []struct {
		name    string
		seq     []proxy.Attempt
		cleared int // the canary (1-based) that clears, 0: none
		want    *pb.PassiveResult
	}{
		{"two successes clear", []proxy.Attempt{ok, ok}, 2, nil},
		{"a failure resets", []proxy.Attempt{ok, bad, ok}, 0, &pb.PassiveResult{Requests: 13, Failures: 11}},
		{"slow is a failure", []proxy.Attempt{ok, slow, ok}, 0, &pb.PassiveResult{Requests: 13, Failures: 10, Slow: 1}},
		{"ignored leaves the count", []proxy.Attempt{ok, busy, ok}, 3, nil},
		{"fail then two successes", []proxy.Attempt{bad, bad, ok, ok}, 4, nil},
		{"failures only", []proxy.Attempt{bad, bad, bad}, 0, &pb.PassiveResult{Requests: 13, Failures: 13}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, now := newTestPassive(t, PassiveConfig{Slow: 500 * time.Millisecond})
			p.serve(servedBy(addr))
			for range 10 {
				p.record(code(500))
			}
			p.serve(servedBy("http://b:1"))
			cleared := 0
			for i, a := range tc.seq {
				*now = now.Add(5 * time.Second)
				if p.canaried(a) {
					if cleared != 0 {
						t.Fatalf("canary %d cleared a window canary %d cleared already", i+1, cleared)
					}
					cleared = i + 1
				}
			}
			if cleared != tc.cleared {
				t.Fatalf("cleared by canary %d, want %d", cleared, tc.cleared)
			}
			got := p.result(addr)
			if tc.want == nil {
				if got != nil || isHeld(p, addr) {
					t.Fatalf("cleared window = %v (held %v), want none", got, isHeld(p, addr))
				}
				return
			}
			eq(t, got, tc.want)
			if !isHeld(p, addr) {
				t.Fatal("the window is no longer held")
			}
		})
	}
}

// A canary's outcome is not recorded in a window that is not held (its
// origin is served: real traffic speaks for it).
func TestPassiveCanaryNotHeld(t *testing.T) {
	p, _ := newTestPassive(t, PassiveConfig{})
	p.serve(servedBy(addr))
	p.record(code(500))
	for i := range CanarySuccesses {
		if p.canaried(code(200)) {
			t.Fatalf("canary %d cleared a live window", i+1)
		}
	}
	eq(t, p.result(addr), &pb.PassiveResult{Requests: 1, Failures: 1})
	if p.canaried(proxy.Attempt{Address: "http://unknown:1", Status: 200}) {
		t.Fatal("canaried cleared a window that does not exist")
	}
}

// A held window is canaried with the Host of the site that served its
// origin, once a gateway asked for it (a gateway that casts no passive
// vote never does, and its nodes send no canary).
func TestPassiveCanaryTargets(t *testing.T) {
	p, _ := newTestPassive(t, PassiveConfig{})
	snap := &publication.Snapshot{Version: 1, Sites: []publication.Site{
		{Name: "www", Hostname: "www.example.com", Level: 1, Origins: []publication.Origin{{Name: "a1", Address: addr}}},
		{Name: "img", Hostname: "img.example.com", Level: 1, Origins: []publication.Origin{{Name: "a1", Address: addr}, {Name: "i1", Address: "http://i:1"}}},
	}}
	p.serve(served(snap))
	p.record(code(500))
	p.record(proxy.Attempt{Address: "http://i:1", Status: 200})
	p.serve(nil)
	if got := p.canaryTargets(); len(got) != 0 {
		t.Fatalf("canary targets %+v before a gateway asked for the window, want none", got)
	}
	p.result(addr) // a gateway asks: it casts passive votes
	got := p.canaryTargets()
	if len(got) != 1 || got[0].address != addr || got[0].host != "www.example.com" {
		t.Fatalf("canary targets = %+v, want %s with host www.example.com", got, addr)
	}
}

func TestPassiveConfigInvalid(t *testing.T) {
	for _, cfg := range []PassiveConfig{{Window: -1}, {Window: MaxPassiveWindow + 1}, {Age: -time.Second}, {Slow: -1}, {Ignore: []string{"x"}}} {
		if _, err := newPassive(cfg, nil); err == nil {
			t.Errorf("newPassive(%+v) = nil error", cfg)
		}
	}
}

// Recording allocates nothing once the origin's window exists.
func TestPassiveRecordAllocs(t *testing.T) {
	p, _ := newTestPassive(t, PassiveConfig{})
	p.record(code(200))
	a := proxy.Attempt{Address: addr, Status: 500, Method: "GET", Path: "/page"}
	if n := testing.AllocsPerRun(1000, func() { p.record(a) }); n != 0 {
		t.Fatalf("record allocates %v times", n)
	}
}

// The canaries ask for the latest distinct paths of failed GET and HEAD
// requests, in turn; other methods, and requests that did not fail, leave
// none; without any, they ask for CanaryPath.
func TestPassiveCanaryPaths(t *testing.T) {
	p, _ := newTestPassive(t, PassiveConfig{})
	p.serve(servedBy(addr))
	req := func(method, path string, status int) {
		p.record(proxy.Attempt{Address: addr, Method: method, Path: path, Status: status})
	}
	req("GET", "/ok", 200)
	req("POST", "/form", 500)
	for _, path := range []string{"/a", "/b", "/a", "/c", "/d", "/e"} {
		req("GET", path, 503)
	}
	req("HEAD", "/f", 502)
	p.serve(nil)
	p.result(addr)
	var got []string
	for range 5 {
		c := p.canaryTargets()
		if len(c) != 1 {
			t.Fatalf("canary targets %+v", c)
		}
		got = append(got, c[0].path)
	}
	first := slices.Sorted(slices.Values(got[:4]))
	if !slices.Equal(first, []string{"/c", "/d", "/e", "/f"}) || got[4] != got[0] {
		t.Fatalf("canary paths %q, want /c, /d, /e and /f in turn", got)
	}

	q, _ := newTestPassive(t, PassiveConfig{})
	q.serve(servedBy(addr))
	q.record(proxy.Attempt{Address: addr, Method: "POST", Path: "/form", Status: 500})
	q.serve(nil)
	q.result(addr)
	if c := q.canaryTargets(); len(c) != 1 || c[0].path != CanaryPath {
		t.Fatalf("canary targets %+v, want %s", c, CanaryPath)
	}
}
