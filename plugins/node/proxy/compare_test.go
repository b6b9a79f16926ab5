package proxy

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/benchproc"
	"github.com/vigilcdn/vigil/plugins/node/internal/leanload"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// BenchmarkProxyCompare measures the proxy's request path before the fast
// path (legacy_test.go) and now, side by side in one run: the same loopback
// origin, the same http.Server settings as vigil-node's -proxy-listen, and a
// lean HTTP/1.1 load generator at fixed concurrency (64 keep-alive
// connections, like wrk -c64) that costs little CPU of its own, so that the
// proxy's cost dominates. The two paths run in alternation, rounds times, and
// the reported ratios are medians over the rounds (the cores are shared and
// noisy: compare the ratios, not the absolute figures):
//
//	go test -run '^$' -bench ProxyCompare -benchtime 20000x ./plugins/node/proxy
//
// now/legacy-rps above 1 is the speed-up; legacy/now-p99 above 1 is a
// lower p99 now.
//
// With VIGIL_BENCH_ON_ATTEMPT=1 the "now" proxy has an Options.OnAttempt
// hook doing what vigil-node's passive windows do per attempt (a map read
// under a read lock, a ring write under the origin's lock): compare with a
// run without it.
func BenchmarkProxyCompare(b *testing.B) {
	origin := leanload.Origin(b)
	snap := &publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: "http://" + origin, State: "healthy"}}}}}
	var opts Options
	if os.Getenv("VIGIL_BENCH_ON_ATTEMPT") != "" {
		opts.OnAttempt = benchWindow() // what vigil-node's passive windows cost
	}
	pNow, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	pNow.SetSnapshot(snap)
	pOld, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	pOld.SetSnapshot(snap)
	targets := []struct {
		name string
		addr string
	}{
		{"direct", origin},
		{"legacy", leanload.Serve(b, newLegacy(pOld))},
		{"handler", leanload.Serve(b, pNow)},
		{"now", leanload.ServeOn(b, pNow.NewServer(0, 0))},
	}
	const rounds = 3
	rps := map[string][]float64{}
	p50 := map[string][]time.Duration{}
	p99 := map[string][]time.Duration{}
	for _, t := range targets {
		leanload.Load(b, t.addr, "www.example.com", 64, 2000) // warm the connections up
	}
	b.ResetTimer()
	for range rounds {
		for _, t := range targets {
			r, l50, l99 := leanload.Load(b, t.addr, "www.example.com", 64, max(b.N/rounds, 640))
			rps[t.name] = append(rps[t.name], r)
			p50[t.name] = append(p50[t.name], l50)
			p99[t.name] = append(p99[t.name], l99)
		}
	}
	b.StopTimer()
	durs := func(d []time.Duration) []float64 {
		var f []float64
		for _, x := range d {
			f = append(f, float64(x))
		}
		return f
	}
	b.ReportMetric(benchproc.MedianRatio(rps["now"], rps["legacy"]), "now/legacy-rps")
	b.ReportMetric(benchproc.MedianRatio(rps["now"], rps["handler"]), "now/handler-rps")
	b.ReportMetric(benchproc.MedianRatio(durs(p99["handler"]), durs(p99["now"])), "handler/now-p99")
	b.ReportMetric(benchproc.MedianRatio(durs(p99["legacy"]), durs(p99["now"])), "legacy/now-p99")
	b.ReportMetric(benchproc.MedianRatio(rps["now"], rps["direct"]), "now/direct-rps")
	b.ReportMetric(benchproc.Median(durs(p50["now"]))/1e3, "now-p50-µs")
	b.ReportMetric(benchproc.Median(durs(p99["now"]))/1e3, "now-p99-µs")
	b.ReportMetric(benchproc.Median(durs(p50["legacy"]))/1e3, "legacy-p50-µs")
	b.ReportMetric(benchproc.Median(durs(p99["legacy"]))/1e3, "legacy-p99-µs")
	b.ReportMetric(benchproc.Median(rps["now"]), "now-rps")
}

// BenchmarkProxyLean is the current path alone under the lean load, for
// profiling: go test -run '^$' -bench ProxyLean -cpuprofile cpu.out
func BenchmarkProxyLean(b *testing.B) {
	origin := leanload.Origin(b)
	p, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	p.SetSnapshot(&publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: "http://" + origin, State: "healthy"}}}}})
	addr := leanload.ServeOn(b, p.NewServer(0, 0))
	leanload.Load(b, addr, "www.example.com", 64, 2000)
	b.ResetTimer()
	rps, p50, p99 := leanload.Load(b, addr, "www.example.com", 64, b.N)
	b.ReportMetric(rps, "rps")
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
}

// benchWindow is a stand-in for vigil-node's passive windows
// (agent.passive.record), which this package cannot import.
func benchWindow() func(Attempt) {
	type ring struct {
		mu   sync.Mutex
		at   [20]int64
		kind [20]uint8
		next int
	}
	var mu sync.RWMutex
	m := map[string]*ring{}
	return func(a Attempt) {
		mu.RLock()
		r := m[a.Address]
		mu.RUnlock()
		if r == nil {
			mu.Lock()
			if r = m[a.Address]; r == nil {
				r = &ring{}
				m[a.Address] = r
			}
			mu.Unlock()
		}
		now := time.Now().UnixNano()
		r.mu.Lock()
		r.at[r.next], r.kind[r.next] = now, uint8(a.Status/100)
		r.next = (r.next + 1) % len(r.at)
		r.mu.Unlock()
	}
}
