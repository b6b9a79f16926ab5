package dns

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/core/publish"
)

// BenchmarkDNSCompare sends the same UDP load (A queries over 1000 names,
// from 8 goroutines with one socket each and one query in flight each) to
// vigil's server with the fast path, to the same server without it (the
// path before issue 19), and to NSD serving the same zone when nsd is
// installed (skipped otherwise). They run in alternation, 3 rounds, in one
// run; the ratios are medians over the rounds (the cores are shared: compare
// the ratios, never the absolute figures):
//
//	go test -run '^$' -bench DNSCompare -benchtime 200000x ./core/publish/dns
//
// fast/nofast-qps is the fast path's speed-up, fast/nsd-qps vigil against
// NSD (the goal of issue 19 is 0.8 or more).
func BenchmarkDNSCompare(b *testing.B) {
	const names = 1000
	hub := publish.NewHub()
	snap := bigSnapshot(1, names)
	hub.Publish(snap)
	fast := start(b, newConfig(false), hub)
	slowSrv, err := New(newConfig(false), hub, nil)
	if err != nil {
		b.Fatal(err)
	}
	slowSrv.noFast = true
	if err := slowSrv.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { slowSrv.Close() })
	targets := []struct{ name, addr string }{{"fast", fast.Addr()}, {"nofast", slowSrv.Addr()}}
	if addr, ok := startNSD(b, fast.table.Load()); ok {
		targets = append(targets, struct{ name, addr string }{"nsd", addr})
	}
	queries := make([][]byte, names)
	for i := range queries {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("s%d.cdn.example.net.", i), dns.TypeA)
		queries[i], _ = m.Pack()
	}
	for _, t := range targets {
		udpLoad(b, t.addr, queries, 8, 2000)
	}
	const rounds = 3
	qps := map[string][]float64{}
	b.ResetTimer()
	for range rounds {
		for _, t := range targets {
			qps[t.name] = append(qps[t.name], udpLoad(b, t.addr, queries, 8, max(b.N/rounds, 800)))
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
	b.ReportMetric(ratio(qps["fast"], qps["nofast"]), "fast/nofast-qps")
	if _, ok := qps["nsd"]; ok {
		b.ReportMetric(ratio(qps["fast"], qps["nsd"]), "fast/nsd-qps")
		b.ReportMetric(ratio(qps["nofast"], qps["nsd"]), "nofast/nsd-qps")
	}
	v := slices.Clone(qps["fast"])
	slices.Sort(v)
	b.ReportMetric(v[len(v)/2], "fast-q/s")
}

// udpLoad sends n queries (cycling through queries) from clients sockets,
// one in flight each, and returns the answers per second.
func udpLoad(b *testing.B, addr string, queries [][]byte, clients, n int) float64 {
	var left atomic.Int64
	left.Store(int64(n))
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			conn, err := net.Dial("udp", addr)
			if err != nil {
				failed.Store(err)
				return
			}
			defer conn.Close()
			buf := make([]byte, 4096)
			q := make([]byte, 512)
			for i := c; left.Add(-1) >= 0; i++ {
				q = append(q[:0], queries[i%len(queries)]...)
				q[0], q[1] = byte(i>>8), byte(i)
				_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
				if _, err := conn.Write(q); err != nil {
					failed.Store(err)
					return
				}
				for {
					k, err := conn.Read(buf)
					if err != nil {
						failed.Store(fmt.Errorf("%s: %w", addr, err))
						return
					}
					if k >= 12 && buf[0] == q[0] && buf[1] == q[1] {
						if buf[3]&0x0f != 0 || buf[7] == 0 {
							failed.Store(fmt.Errorf("%s: answer rcode %d, %d records", addr, buf[3]&0x0f, buf[7]))
							return
						}
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return float64(n) / time.Since(start).Seconds()
}

// startNSD runs NSD on a free loopback port with t's zone, or reports false
// when nsd is not installed.
func startNSD(b *testing.B, t *table) (string, bool) {
	bin, err := exec.LookPath("nsd")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nsd", "/usr/local/sbin/nsd"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
	if bin == "" {
		b.Log("nsd is not installed: comparing without it")
		return "", false
	}
	dir := b.TempDir()
	var zf strings.Builder
	fmt.Fprintf(&zf, "$ORIGIN %s\n", t.zone)
	for _, rr := range append(append([]dns.RR{}, t.soa...), t.ns...) {
		fmt.Fprintln(&zf, rr.String())
	}
	for _, n := range t.names {
		for _, rr := range append(append([]dns.RR{}, n.a...), n.aaaa...) {
			fmt.Fprintln(&zf, rr.String())
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "zone"), []byte(zf.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()
	conf := fmt.Sprintf(`server:
    ip-address: 127.0.0.1@%d
    port: %d
    username: ""
    chroot: ""
    zonesdir: "%[3]s"
    database: ""
    zonelistfile: "%[3]s/zone.list"
    xfrdfile: "%[3]s/xfrd.state"
    pidfile: "%[3]s/nsd.pid"
    logfile: "%[3]s/nsd.log"
    verbosity: 0
remote-control:
    control-enable: no
zone:
    name: %s
    zonefile: "%[3]s/zone"
`, port, port, dir, t.zone)
	cfg := filepath.Join(dir, "nsd.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-d", "-c", cfg)
	out, err := os.Create(filepath.Join(dir, "nsd.out"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); out.Close() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion("s1.cdn.example.net.", dns.TypeA)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if r, _, err := c.Exchange(m, addr); err == nil && len(r.Answer) > 0 {
			return addr, true
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "nsd.out"))
			log2, _ := os.ReadFile(filepath.Join(dir, "nsd.log"))
			b.Fatalf("nsd never answered:\n%s\n%s", log, log2)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
