package edge_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// BenchmarkEdgeLean is BenchmarkEdgeCompare with a load generator and an
// origin that cost little CPU (raw HTTP/1.1 over 64 keep-alive connections,
// like wrk -c64; no net/http on either side), so that what is compared is the
// proxies themselves: vigil-node's proxy behind an http.Server configured as
// -proxy-listen, HAProxy and nginx (each skipped when absent), and the origin
// directly. They run in alternation, 3 rounds, in one run; the ratios are
// medians over the rounds:
//
//	go test -run '^$' -bench EdgeLean -benchtime 60000x ./plugins/node/edge
//
// vigil/haproxy-rps is vigil-node's throughput over HAProxy's (the goal of
// issue 19 is 0.8 or more); haproxy/vigil-p99 above 1 means vigil-node's p99
// is lower.
func BenchmarkEdgeLean(b *testing.B) {
	origin := leanOrigin(b)
	dir := b.TempDir()
	p, err := proxy.New(proxy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p.SetSnapshot(&publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: hostname, Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: "http://" + origin, State: "healthy"}}}}})
	targets := []struct{ name, addr string }{{"direct", origin}, {"vigil", serveLean(b, p)}}
	if bin, ok := lookPeer("haproxy"); ok {
		listen := freePort(b)
		cfg := filepath.Join(dir, "haproxy.cfg")
		writeFile(b, cfg, fmt.Sprintf(`global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend fe
    bind %s
    default_backend www
backend www
    http-reuse always
    server a1 %s
`, listen, origin))
		daemon(b, dir, bin, "-W", "-db", "-f", cfg)
		targets = append(targets, struct{ name, addr string }{"haproxy", listen})
	}
	if bin, ok := lookPeer("nginx"); ok {
		listen := freePort(b)
		user := ""
		if os.Geteuid() == 0 {
			user = "user root;"
		}
		cfg := filepath.Join(dir, "nginx.conf")
		writeFile(b, cfg, fmt.Sprintf(`daemon off;
%s
worker_processes auto;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    upstream www { server %[3]s; keepalive 64; }
    server {
        listen %[4]s;
        location / {
            proxy_pass http://www;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
        }
    }
}
`, user, dir, origin, listen))
		daemon(b, dir, bin, "-p", dir, "-c", cfg, "-e", dir+"/error.log")
		targets = append(targets, struct{ name, addr string }{"nginx", listen})
	}
	for _, t := range targets {
		waitLean(b, t.addr)
		leanLoad(b, t.addr, 64, 2000) // warm up
	}
	const rounds = 3
	rps := map[string][]float64{}
	p99 := map[string][]float64{}
	b.ResetTimer()
	for range rounds {
		for _, t := range targets {
			r, _, l99 := leanLoad(b, t.addr, 64, max(b.N/rounds, 640))
			rps[t.name] = append(rps[t.name], r)
			p99[t.name] = append(p99[t.name], float64(l99))
		}
	}
	b.StopTimer()
	ratio := func(a, c []float64) float64 {
		var rs []float64
		for i := range a {
			rs = append(rs, a[i]/c[i])
		}
		return medianOf(rs)
	}
	for _, t := range targets {
		if t.name == "vigil" {
			continue
		}
		b.ReportMetric(ratio(rps["vigil"], rps[t.name]), "vigil/"+t.name+"-rps")
		b.ReportMetric(ratio(p99[t.name], p99["vigil"]), t.name+"/vigil-p99")
	}
	b.ReportMetric(medianOf(rps["vigil"]), "vigil-rps")
	b.ReportMetric(medianOf(p99["vigil"])/1e3, "vigil-p99-µs")
}

// lookPeer finds an edge binary, or reports it absent (the benchmark then
// compares without it).
func lookPeer(name string) (string, bool) {
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p, true
		}
	}
	return "", false
}

// waitLean waits until addr answers a GET.
func waitLean(b *testing.B, addr string) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: " + hostname + "\r\n\r\n"))
			if err == nil {
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				err = readLeanResponse(bufio.NewReader(c))
			}
			c.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s never served: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func medianOf(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// serve runs h behind an http.Server configured as vigil-node's
// -proxy-listen and returns its address.
func serveLean(b *testing.B, h http.Handler) string {
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
	req := []byte("GET / HTTP/1.1\r\nHost: " + hostname + "\r\n\r\n")
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
				if err := readLeanResponse(br); err != nil {
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
func readLeanResponse(br *bufio.Reader) error {
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
