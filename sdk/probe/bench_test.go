package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
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

// benchH2Origin is a loopback TLS origin speaking HTTP/2 only, answering 200
// with a small body. It returns its URL, a pool trusting its certificate
// (issued for example.com) and a counter of its connections.
func benchH2Origin(b *testing.B) (url string, roots *x509.CertPool, conns *atomic.Int64) {
	b.Helper()
	conns = new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "want HTTP/2", http.StatusHTTPVersionNotSupported)
			return
		}
		io.WriteString(w, "ok\n")
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	b.Cleanup(srv.Close)
	roots = x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return srv.URL, roots, conns
}

// checkConns fails the benchmark unless every operation had its own
// connection, so that the probe and the baseline both pay a handshake per
// request. With exact set there must be no more connections than requests
// either; net/http may dial a few spare ones under concurrency.
func checkConns(b *testing.B, conns *atomic.Int64, base int64, exact bool) {
	b.Helper()
	n := conns.Load() - base
	if n < int64(b.N) || exact && n != int64(b.N) {
		b.Fatalf("%d connections for %d requests, want one each", n, b.N)
	}
	b.ReportMetric(float64(n)/float64(b.N), "conns/op")
}

// BenchmarkProbeH2 is BenchmarkProbe against an HTTP/2 origin over TLS.
// Compare with BenchmarkPlainGETH2.
func BenchmarkProbeH2(b *testing.B) {
	url, roots, conns := benchH2Origin(b)
	req := Request{Address: url, Host: "example.com", Path: "/health", RootCAs: roots}
	ctx := context.Background()
	base := conns.Load()
	runConcurrent(b, func() error {
		res, err := Do(ctx, req)
		if err != nil {
			return err
		}
		if !res.Up || res.Proto != "HTTP/2.0" {
			return &benchError{res}
		}
		return nil
	})
	checkConns(b, conns, base, true)
}

// BenchmarkPlainGETH2 is the baseline for BenchmarkProbeH2: a plain net/http
// GET loop over HTTP/2, one connection per request (keep-alive off), body
// drained and closed.
func BenchmarkPlainGETH2(b *testing.B) {
	url, roots, conns := benchH2Origin(b)
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: "example.com"},
		ForceAttemptHTTP2: true,
		DisableKeepAlives: true,
	}}
	b.Cleanup(client.CloseIdleConnections)
	base := conns.Load()
	runConcurrent(b, func() error {
		resp, err := client.Get(url + "/health")
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.ProtoMajor != 2 {
			err = &protoError{resp.Proto}
		}
		return err
	})
	checkConns(b, conns, base, false)
}

type protoError struct{ proto string }

func (e *protoError) Error() string { return "spoke " + e.proto + ", want HTTP/2.0" }

type benchError struct{ res Result }

func (e *benchError) Error() string { return e.res.Reason.String() + ": " + e.res.Detail }
