package probe

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// benchConcurrency is how many probes run at once in the benchmarks, as a
// source probing many origins would.
const benchConcurrency = 32

// benchOrigin is a loopback origin answering 200 with a small body.
func benchOrigin(b *testing.B) string {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// runConcurrent runs op b.N times in total from benchConcurrency goroutines.
func runConcurrent(b *testing.B, op func() error) {
	b.Helper()
	var next atomic.Int64
	var failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for range benchConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := op(); err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d of %d operations failed, first: %v", n, b.N, firstErr.Load())
	}
}

// BenchmarkProbe measures probe throughput against a loopback origin with
// benchConcurrency probes in flight. Compare with BenchmarkPlainGET.
func BenchmarkProbe(b *testing.B) {
	req := Request{Address: benchOrigin(b), Host: "site.example", Path: "/health"}
	ctx := context.Background()
	runConcurrent(b, func() error {
		res, err := Do(ctx, req)
		if err != nil {
			return err
		}
		if !res.Up {
			return &benchError{res}
		}
		return nil
	})
}

// BenchmarkPlainGET is the baseline for BenchmarkProbe: a plain net/http GET
// loop at the same concurrency, keep-alive off, body drained and closed.
func BenchmarkPlainGET(b *testing.B) {
	url := benchOrigin(b) + "/health"
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	b.Cleanup(client.CloseIdleConnections)
	runConcurrent(b, func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	})
}

type benchError struct{ res Result }

func (e *benchError) Error() string { return string(e.res.Reason) + ": " + e.res.Detail }
