// Package leanload is the load of vigil-node's proxy benchmarks: a
// loopback origin and a client that cost little CPU of their own (no
// net/http on either side), so that the proxy under test, or the peer it is
// compared with, is what the machine's two cores spend their time on. It
// is for benchmarks only.
package leanload

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Serve runs h behind an http.Server configured as vigil-node's
// -proxy-listen and returns its address.
func Serve(b testing.TB, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// Server is a server ServeOn runs: vigil-node's proxy.Server, for one.
type Server interface {
	Serve(net.Listener) error
	Close() error
}

// ServeOn runs s on a loopback listener and returns its address.
func ServeOn(b testing.TB, s Server) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	b.Cleanup(func() { _ = s.Close() })
	return ln.Addr().String()
}

// Origin is a loopback origin answering every request with 1 KiB, at
// little CPU cost (no net/http).
func Origin(b testing.TB) string {
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

// Load sends n GETs with Host host over conns keep-alive connections to
// addr and returns the throughput (requests a second) and the p50 and p99
// latencies. A failed request fails b.
func Load(b testing.TB, addr, host string, conns, n int) (float64, time.Duration, time.Duration) {
	req := []byte("GET / HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
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
				if err := ReadResponse(br); err != nil {
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

// ReadResponse reads one 200 response with a Content-Length body.
func ReadResponse(br *bufio.Reader) error {
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
