package nodeagent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/sdk/publication"
)

func TestParsePassiveFrom(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"", nil, ""},
		{"none", []string{}, ""},
		{"haproxy", []string{"haproxy"}, ""},
		{"proxy, nginx-log:/var/log/nginx/vigil.log", []string{"proxy", "nginx-log:/var/log/nginx/vigil.log"}, ""},
		{"nginx-log:", nil, "write nginx-log:PATH"},
		{"access-log:", nil, "write nginx-log:PATH (or access-log:PATH)"},
		{"access-log:/var/log/varnish/vigil.json", []string{"access-log:/var/log/varnish/vigil.json"}, ""},
		{"varnish", nil, "use proxy (vigil-node's own proxy), haproxy"},
		{"haproxy,haproxy", nil, "haproxy is listed twice"},
		{"proxy,none", nil, "none stands alone"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePassiveFrom(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") || (got == nil) != (tc.want == nil) {
				t.Fatalf("ParsePassiveFrom(%q) = %#v, %v; want %#v", tc.in, got, err, tc.want)
			}
		})
	}
}

// The sources a node's flags ask for are checked against what it does.
func TestPassiveSources(t *testing.T) {
	h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: "/nonexistent/admin.sock"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		proxy   bool
		ha      bool
		logs    int
		wantErr string
	}{
		{"default, proxying", Config{ProxyListen: "127.0.0.1:0"}, true, false, 0, ""},
		{"default, driving HAProxy", Config{Edges: []edge.Driver{h}}, false, true, 0, ""},
		{"none", Config{ProxyListen: "127.0.0.1:0", Edges: []edge.Driver{h}, PassiveFrom: []string{}}, false, false, 0, ""},
		{"a log", Config{PassiveFrom: []string{"nginx-log:/tmp/x.log"}}, false, false, 1, ""},
		{"two logs", Config{PassiveFrom: []string{"nginx-log:/tmp/x.log", "access-log:/tmp/y.log"}}, false, false, 2, ""},
		{"haproxy without the driver", Config{PassiveFrom: []string{"haproxy"}}, false, false, 0, "needs -haproxy-socket"},
		{"proxy without a proxy", Config{PassiveFrom: []string{"proxy"}}, false, false, 0, "needs -proxy-listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy, ha, logs, err := passiveSources(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || proxy != tc.proxy || (ha != nil) != tc.ha || len(logs) != tc.logs {
				t.Fatalf("passiveSources = %v %v %v %v; want %v %v %d", proxy, ha != nil, logs, err, tc.proxy, tc.ha, tc.logs)
			}
		})
	}
}

// recordCounts spreads the outcomes in the window, scaled to its size in
// the same proportions.
func TestRecordCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    edge.Outcomes
		want [3]uint32 // requests, failures, timeouts
	}{
		{"fewer than the window", edge.Outcomes{OK: 6, Status5xx: 3, Errors: 1}, [3]uint32{10, 4, 1}},
		{"scaled to the window", edge.Outcomes{OK: 200, Status5xx: 100}, [3]uint32{20, 7, 0}},
		{"largest remainders add up", edge.Outcomes{OK: 1, Status5xx: 1, Errors: 1000}, [3]uint32{20, 20, 20}},
		{"all fine", edge.Outcomes{OK: 1e9}, [3]uint32{20, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPassive(PassiveConfig{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			p.recordCounts("http://192.0.2.1", tc.o)
			got := p.result("http://192.0.2.1")
			if got == nil || [3]uint32{got.Requests, got.Failures, got.Timeouts} != tc.want || got.Ignored != 0 {
				t.Fatalf("window %v, want requests, failures, timeouts %v", got, tc.want)
			}
		})
	}
	// Evenly spread: a later smaller read leaves the proportions, not a
	// run of one kind, in the latest attempts.
	p, _ := newPassive(PassiveConfig{Window: 6}, nil)
	p.recordCounts("a", edge.Outcomes{OK: 4, Status5xx: 2})
	w := p.m["a"]
	var kinds []uint8
	for i := range w.n {
		kinds = append(kinds, w.ring[i].kind)
	}
	if kinds[0] == kinds[1] && kinds[1] == kinds[2] || kinds[3] == kinds[4] && kinds[4] == kinds[5] && kinds[5] == kind5xx {
		t.Fatalf("kinds %v, want the failures spread", kinds)
	}
}

// fakeStats is an HAProxy whose counters the test sets.
type fakeStats struct {
	mu    sync.Mutex
	proc  string
	stats []edge.ServerStats
	reads int
}

func (f *fakeStats) Stats(context.Context) (string, []edge.ServerStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.proc, append([]edge.ServerStats(nil), f.stats...), nil
}

func (f *fakeStats) set(proc string, s ...edge.ServerStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proc, f.stats = proc, s
}

// feedHAProxy reads the counters on the interval's clock (synctest's), maps
// the driver's server names (backup servers too) to the published
// origins, and counts a reload's counters from 0.
func TestFeedHAProxy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := newPassive(PassiveConfig{Window: 100, Age: time.Hour}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := &Agent{passive: p, log: hclog.NewNullLogger(), cfg: Config{Edge: edge.HubOptions{Prefix: "v_"}}}
		a.current.Store(&publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
			Origins: []publication.Origin{{Name: "a1", Address: "http://192.0.2.1", State: "healthy"}},
			Backup:  &publication.Backup{Level: 2, Origins: []publication.Origin{{Name: "b1", Address: "http://192.0.2.2", State: "healthy"}}}}}})
		srv := func(name string, ok, s5, econ uint64) edge.ServerStats {
			return edge.ServerStats{Backend: "v_www", Server: name, ID: 1, Hrsp: [5]uint64{0, ok, 0, 0, s5}, Econ: econ}
		}
		f := &fakeStats{}
		f.set("p1", srv("a1", 1000, 1000, 0), srv("b1:backup", 0, 0, 0), srv("other", 5, 5, 5))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); a.feedHAProxy(ctx, f, time.Second) }()
		read := func() {
			time.Sleep(time.Second)
			synctest.Wait()
		}
		read() // the baseline
		if r := p.result("http://192.0.2.1"); r != nil {
			t.Fatalf("after the baseline: %v, want no window (what came before is not counted)", r)
		}
		f.set("p1", srv("a1", 1020, 1010, 0), srv("b1:backup", 3, 0, 2), srv("other", 50, 50, 50))
		read()
		if r := p.result("http://192.0.2.1"); r.GetRequests() != 30 || r.GetFailures() != 10 {
			t.Fatalf("a1's window %v, want 30 requests, 10 failed", r)
		}
		if r := p.result("http://192.0.2.2"); r.GetRequests() != 5 || r.GetTimeouts() != 2 {
			t.Fatalf("b1's window (its backup server's counters) %v, want 5 requests, 2 connection errors", r)
		}
		if len(p.m) != 2 {
			t.Fatalf("%d windows, want 2: a server of no origin feeds none", len(p.m))
		}
		// A reload: a new process whose counters are higher than the
		// deltas would guess are counted whole.
		f.set("p2", srv("a1", 1, 9, 0))
		read()
		if r := p.result("http://192.0.2.1"); r.GetRequests() != 40 || r.GetFailures() != 19 {
			t.Fatalf("a1's window after a reload %v, want 40 requests, 19 failed", r)
		}
		cancel()
		<-done
	})
}

// A node that does not probe has no passive window: a -passive-from of
// its own is refused rather than ignored.
func TestPassiveFromNeedsGateway(t *testing.T) {
	_, err := New(Config{ControlPlane: "http://127.0.0.1:1", PassiveFrom: []string{"nginx-log:/var/log/nginx/vigil.json"}})
	if err == nil || !strings.Contains(err.Error(), "-passive-from needs -gateway") {
		t.Fatalf("New: %v, want -passive-from needs -gateway", err)
	}
	if _, err := New(Config{ControlPlane: "http://127.0.0.1:1", PassiveFrom: []string{}}); err != nil {
		t.Fatalf("-passive-from none without a gateway: %v", err)
	}
}
