package agent

import (
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

// Windows of origins no longer published are forgotten.
func TestPassiveKeep(t *testing.T) {
	p, _ := newTestPassive(t, PassiveConfig{})
	p.record(code(200))
	p.keep(map[string]bool{"http://x:1": true})
	if r := p.result(addr); r != nil {
		t.Fatalf("forgotten window = %v", r)
	}
}

// During a failback ramp the level being left still serves: its origins'
// windows are kept.
func TestPassiveKeepRamp(t *testing.T) {
	snap := &publication.Snapshot{Version: 2, Format: publication.FormatRamp, Sites: []publication.Site{{
		Name: "www", Level: 1, Origins: []publication.Origin{{Name: "a1", Address: "http://a:1"}},
		Ramp: &publication.Ramp{Weight: 25, From: 2, FromOrigins: []publication.Origin{{Name: "b1", Address: addr}}}}}}
	p, _ := newTestPassive(t, PassiveConfig{})
	p.record(code(200))
	p.keep(served(snap))
	eq(t, p.result(addr), &pb.PassiveResult{Requests: 1})
	snap.Sites[0].Ramp = nil // the ramp is over
	p.keep(served(snap))
	if r := p.result(addr); r != nil {
		t.Fatalf("window of the level left = %v", r)
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
	a := code(500)
	if n := testing.AllocsPerRun(1000, func() { p.record(a) }); n != 0 {
		t.Fatalf("record allocates %v times", n)
	}
}
