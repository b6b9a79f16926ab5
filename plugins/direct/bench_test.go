package direct_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vigilcdn/vigil/plugins/direct"
	"github.com/vigilcdn/vigil/sdk"
)

// benchConcurrency is the probes in flight in both halves of
// BenchmarkThroughput; benchTargets the origins in one ballot.
const (
	benchConcurrency = 64
	benchTargets     = 256
)

// BenchmarkThroughput runs, side by side against the same loopback origin,
// the direct source voting on a ballot of benchTargets origins with
// concurrency benchConcurrency, and a plain net/http GET loop over the same
// URLs at the same concurrency with keep-alive off. Compare their ns/probe:
// plain/direct is the throughput ratio (target >= 0.8).
func BenchmarkThroughput(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	}))
	b.Cleanup(srv.Close)
	ballot := sdk.Ballot{Targets: make([]sdk.Target, benchTargets)}
	for i := range ballot.Targets {
		ballot.Targets[i] = sdk.Target{Site: "www", Origin: fmt.Sprint("o", i), Address: srv.URL, Host: "www.example.com", Path: "/health"}
	}

	b.Run("direct", func(b *testing.B) {
		src := direct.New(nil)
		if err := src.Configure(context.Background(), sdk.Config{Values: map[string]any{"concurrency": float64(benchConcurrency)}}); err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			votes, err := src.Vote(ctx, ballot)
			if err != nil || len(votes) != benchTargets {
				b.Fatalf("%d votes, %v", len(votes), err)
			}
			for _, v := range votes {
				if v.Value != sdk.Up {
					b.Fatalf("vote %+v", v)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchTargets), "ns/probe")
	})

	b.Run("plain-get", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		b.Cleanup(client.CloseIdleConnections)
		url := srv.URL + "/health"
		b.ReportAllocs()
		for b.Loop() {
			var next, failed atomic.Int64
			var wg sync.WaitGroup
			for range benchConcurrency {
				wg.Go(func() {
					for next.Add(1) <= benchTargets {
						req, _ := http.NewRequest(http.MethodGet, url, nil)
						req.Host = "www.example.com"
						resp, err := client.Do(req)
						if err != nil {
							failed.Add(1)
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d GETs failed", n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchTargets), "ns/probe")
	})
}
