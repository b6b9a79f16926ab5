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
	"time"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// benchConcurrency is the probes in flight in both halves of
// BenchmarkThroughput; benchTargets the origins in one ballot.
const (
	benchConcurrency = 64
	benchTargets     = 8000
)

// plainRate is the plain loop's probes per second, for the ratio.
var plainRate float64

// BenchmarkThroughput runs, side by side against the same loopback origin,
// a plain net/http GET loop with keep-alive off, and the direct plugin as
// the agent runs it (a subprocess over gRPC) voting on a ballot of
// benchTargets origins, both with benchConcurrency probes in flight. The
// direct half reports direct_vs_plain: its probes per second over the
// plain loop's (the aim is at least 1).
func BenchmarkThroughput(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	}))
	b.Cleanup(srv.Close)
	ballot := sdk.Ballot{Targets: make([]sdk.Target, benchTargets)}
	for i := range ballot.Targets {
		ballot.Targets[i] = sdk.Target{Site: fmt.Sprint("s", i), Origin: "o", Address: srv.URL, Host: "www.example.com", Path: "/health", Timeout: 5 * time.Second}
	}

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
		plainRate = float64(b.N*benchTargets) / b.Elapsed().Seconds()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchTargets), "ns/probe")
		b.ReportMetric(plainRate, "probes/s")
	})

	b.Run("direct-plugin", func(b *testing.B) {
		src := sdktest.Launch(b, sdktest.Build(b, "./cmd/vigil-source-direct"))
		sdktest.Configure(b, src, sdk.Config{Values: map[string]any{"concurrency": float64(benchConcurrency), "spread": 0.0}})
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			votes, err := src.Vote(ctx, ballot)
			cancel()
			if err != nil || len(votes) != benchTargets {
				b.Fatalf("%d votes, %v", len(votes), err)
			}
			for _, v := range votes {
				if v.Value != sdk.Up {
					b.Fatalf("vote %+v", v)
				}
			}
		}
		rate := float64(b.N*benchTargets) / b.Elapsed().Seconds()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchTargets), "ns/probe")
		b.ReportMetric(rate, "probes/s")
		if plainRate > 0 {
			b.ReportMetric(rate/plainRate, "direct_vs_plain")
		}
	})
}

// BenchmarkBlackHoles times one round of the direct plugin over 1,500
// black-holed origins (they accept the connection and never answer) with
// a 1s probe timeout and a 10s deadline: every one must get its verdict in
// about the probe timeout plus the spread, not targets / concurrency x
// timeout. vs_timeout is the round's time over the probe timeout.
func BenchmarkBlackHoles(b *testing.B) {
	const targets = 1500
	addr := sdktest.BlackHole(b)
	src := sdktest.Launch(b, sdktest.Build(b, "./cmd/vigil-source-direct"))
	sdktest.Configure(b, src, sdk.Config{})
	ballot := sdk.Ballot{}
	for i := range targets {
		ballot.Targets = append(ballot.Targets, sdk.Target{Site: fmt.Sprint("s", i), Origin: "a", Address: addr, Host: "www.example.com", Timeout: time.Second})
	}
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		votes, err := src.Vote(ctx, ballot)
		cancel()
		if err != nil || len(votes) != targets {
			b.Fatalf("%d votes, %v", len(votes), err)
		}
		for _, v := range votes {
			if v.Value != sdk.Down || v.Reason != sdk.ReasonTimeout {
				b.Fatalf("vote %+v, want down: timeout", v)
			}
		}
	}
	perRound := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(perRound, "s/round")
	b.ReportMetric(perRound/1.0, "vs_timeout")
}
