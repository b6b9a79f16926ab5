package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	origin := leanOrigin(b)
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
		{"legacy", serve(b, newLegacy(pOld))},
		{"now", serve(b, pNow)},
	}
	const rounds = 3
	rps := map[string][]float64{}
	p50 := map[string][]time.Duration{}
	p99 := map[string][]time.Duration{}
	for _, t := range targets {
		leanLoad(b, t.addr, 64, 2000) // warm the connections up
	}
	b.ResetTimer()
	for range rounds {
		for _, t := range targets {
			r, l50, l99 := leanLoad(b, t.addr, 64, max(b.N/rounds, 640))
			rps[t.name] = append(rps[t.name], r)
			p50[t.name] = append(p50[t.name], l50)
			p99[t.name] = append(p99[t.name], l99)
		}
	}
	b.StopTimer()
	ratio := func(a, c []float64) float64 {
		var rs []float64
		for i := range a {
			rs = append(rs, a[i]/c[i])
		}
		slices.Sort(rs)
		return rs[len(rs)/2]
	}
	durs := func(d []time.Duration) []float64 {
		var f []float64
		for _, x := range d {
			f = append(f, float64(x))
		}
		return f
	}
	b.ReportMetric(ratio(rps["now"], rps["legacy"]), "now/legacy-rps")
	b.ReportMetric(ratio(durs(p99["legacy"]), durs(p99["now"])), "legacy/now-p99")
	b.ReportMetric(ratio(rps["now"], rps["direct"]), "now/direct-rps")
	b.ReportMetric(median(durs(p50["now"]))/1e3, "now-p50-µs")
	b.ReportMetric(median(durs(p99["now"]))/1e3, "now-p99-µs")
	b.ReportMetric(median(durs(p50["legacy"]))/1e3, "legacy-p50-µs")
	b.ReportMetric(median(durs(p99["legacy"]))/1e3, "legacy-p99-µs")
	b.ReportMetric(median(rps["now"]), "now-rps")
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// serve runs h behind an http.Server configured as vigil-node's
// -proxy-listen and returns its address.
func serve(b *testing.B, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// leanOrigin is a loopback origin answering every request with 1 KiB, at
// little CPU cost (no net/http).
func leanOrigin(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 1024)
	resp := append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"), body...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					for { // the request head; GETs carry no body
						l, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(l) <= 2 {
							break
						}
					}
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			})
		}
	})
	b.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// leanLoad sends n GETs with Host www.example.com over conns keep-alive
// connections to addr and returns the throughput and the p50 and p99
// latencies.
func leanLoad(b *testing.B, addr string, conns, n int) (float64, time.Duration, time.Duration) {
	req := []byte("GET / HTTP/1.1\r\nHost: www.example.com\r\n\r\n")
	var left atomic.Int64
	left.Store(int64(n))
	lat := make([][]time.Duration, conns)
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for i := range conns {
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				failed.Store(err)
				return
			}
			defer c.Close()
			br := bufio.NewReaderSize(c, 16<<10)
			mine := make([]time.Duration, 0, n/conns+1)
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				if _, err := c.Write(req); err != nil {
					failed.Store(err)
					return
				}
				if err := readResponse(br); err != nil {
					failed.Store(fmt.Errorf("%s: %w", addr, err))
					return
				}
				mine = append(mine, time.Since(t0))
			}
			lat[i] = mine
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	return float64(len(all)) / elapsed.Seconds(), all[len(all)/2], all[len(all)*99/100]
}

// readResponse reads one response with a Content-Length body.
func readResponse(br *bufio.Reader) error {
	status, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200")) {
		return fmt.Errorf("status %q", status)
	}
	length := -1
	for {
		l, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(l) <= 2 {
			break
		}
		if len(l) > 16 && (l[0] == 'C' || l[0] == 'c') && bytes.EqualFold(l[:15], []byte("Content-Length:")) {
			length, err = strconv.Atoi(string(bytes.TrimSpace(l[15:])))
			if err != nil {
				return err
			}
		}
	}
	if length < 0 {
		return fmt.Errorf("no Content-Length")
	}
	_, err = br.Discard(length)
	return err
}

var _ = io.EOF

// BenchmarkProxyLean is the current path alone under the lean load, for
// profiling: go test -run '^$' -bench ProxyLean -cpuprofile cpu.out
func BenchmarkProxyLean(b *testing.B) {
	origin := leanOrigin(b)
	p, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	p.SetSnapshot(&publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: "http://" + origin, State: "healthy"}}}}})
	addr := serve(b, p)
	leanLoad(b, addr, 64, 2000)
	b.ResetTimer()
	rps, p50, p99 := leanLoad(b, addr, 64, b.N)
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
