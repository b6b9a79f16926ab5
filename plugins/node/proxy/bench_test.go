package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/internal/leanload"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// Run both side by side, e.g.
//
//	go test -run '^$' -bench 'Direct|Proxy' -benchtime 20000x ./plugins/node/proxy
//
// and compare ns/op (throughput at the same concurrency) and the p50/p99
// latencies. The ratio Proxy/Direct is the proxy's cost on loopback.

var payload = strings.Repeat("x", 1024)

func benchOrigin(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, payload)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkDirect: visitors hit the origin directly.
func BenchmarkDirect(b *testing.B) {
	origin := benchOrigin(b)
	load(b, origin.URL)
}

// BenchmarkProxy: the same load through the proxy's Server to the same
// origin.
func BenchmarkProxy(b *testing.B) {
	origin := benchOrigin(b)
	p, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	p.SetSnapshot(&publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: origin.URL, State: "healthy"}}}}})
	load(b, "http://"+leanload.ServeOn(b, p.NewServer(0, 0))) // as vigil-node serves it
}

// load sends b.N GETs from 4*GOMAXPROCS goroutines over keep-alive
// connections and reports latency percentiles.
func load(b *testing.B, url string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	b.Cleanup(client.CloseIdleConnections)
	var mu sync.Mutex
	var all []time.Duration
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodGet, url+"/", nil)
			req.Host = "www.example.com"
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		all = append(all, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}
