package edge_test

import (
	"bufio"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/internal/leanload"
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
	origin := leanload.Origin(b)
	dir := b.TempDir()
	p, err := proxy.New(proxy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p.SetSnapshot(&publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: hostname, Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: "http://" + origin, State: "healthy"}}}}})
	targets := []struct{ name, addr string }{{"direct", origin}, {"vigil", leanload.ServeOn(b, p.NewServer(0, 0))}}
	if bin, ok := lookPeer("haproxy"); ok {
		targets = append(targets, struct{ name, addr string }{"haproxy", startHAProxyPeer(b, dir, bin, origin)})
	}
	if bin, ok := lookPeer("nginx"); ok {
		targets = append(targets, struct{ name, addr string }{"nginx", startNginxPeer(b, dir, bin, origin)})
	}
	for _, t := range targets {
		waitLean(b, t.addr)
		leanload.Load(b, t.addr, hostname, 64, 2000) // warm up
	}
	const rounds = 3
	rps := map[string][]float64{}
	p99 := map[string][]float64{}
	b.ResetTimer()
	for range rounds {
		for _, t := range targets {
			r, _, l99 := leanload.Load(b, t.addr, hostname, 64, max(b.N/rounds, 640))
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
		return leanload.Median(rs)
	}
	for _, t := range targets {
		if t.name == "vigil" {
			continue
		}
		b.ReportMetric(ratio(rps["vigil"], rps[t.name]), "vigil/"+t.name+"-rps")
		b.ReportMetric(ratio(p99[t.name], p99["vigil"]), t.name+"/vigil-p99")
	}
	b.ReportMetric(leanload.Median(rps["vigil"]), "vigil-rps")
	b.ReportMetric(leanload.Median(p99["vigil"])/1e3, "vigil-p99-µs")
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
				err = leanload.ReadResponse(bufio.NewReader(c))
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
