package edge_test

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/benchproc"
	"github.com/vigilcdn/vigil/plugins/node/internal/leanload"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// BenchmarkEdgeLean is BenchmarkEdgeCompare with a load generator and an
// origin that cost little CPU (raw HTTP/1.1 over 64 keep-alive connections,
// like wrk -c64; no net/http on either side), so that what is compared is the
// proxies themselves: vigil-node's proxy on its Server as -proxy-listen runs
// it (on its event loops), the same with a goroutine per connection on its
// FIFO poller ("vigil-fifo") and on Go's network poller ("vigil-gopoller"),
// HAProxy and nginx (each skipped when
// absent), each in a process of its own, and the origin directly. They run
// in alternation, 5 rounds, in one run; the ratios are medians over the
// rounds (VIGIL_BENCH_IN_PROCESS=1
// adds the proxy inside the benchmark's own process, sharing its scheduler
// with the load and the origin, as "vigil-in-process"; with
// VIGIL_BENCH_PROXY_CPUS each proxy runs on those CPUs only, see pinned):
//
//	go test -run '^$' -bench EdgeLean -benchtime 60000x ./plugins/node/edge
//
// vigil/haproxy-rps is vigil-node's throughput over HAProxy's (the goal of
// issue 19 is 0.8 or more); haproxy/vigil-p50 and -p99 above 1 mean
// vigil-node's latency is lower; NAME-cpu-µs/req is the CPU time (user and
// system, its worker processes' too) each proxy spent per request.
func BenchmarkEdgeLean(b *testing.B) {
	origin := leanload.Origin(b)
	dir := b.TempDir()
	type target struct {
		name, addr string
		pid        int // its process, whose CPU time is counted (0: none)
	}
	vigilAddr, vigilPid := startLeanProxy(b, origin)
	fifoAddr, fifoPid := startLeanProxy(b, origin, fifoPoller)
	goPollAddr, goPollPid := startLeanProxy(b, origin, goPoller)
	targets := []target{{"direct", origin, 0}, {"vigil", vigilAddr, vigilPid},
		{"vigil-fifo", fifoAddr, fifoPid}, {"vigil-gopoller", goPollAddr, goPollPid}}
	if os.Getenv("VIGIL_BENCH_IN_PROCESS") != "" {
		p, err := proxy.New(proxy.Options{})
		if err != nil {
			b.Fatal(err)
		}
		p.SetSnapshot(leanSnapshot(origin))
		targets = append(targets, target{"vigil-in-process", leanload.ServeOn(b, p.NewServer(0, 0)), 0})
	}
	if bin, ok := lookPeer("haproxy"); ok {
		addr, pid := startHAProxyPeer(b, dir, bin, origin)
		targets = append(targets, target{"haproxy", addr, pid})
	}
	if bin, ok := lookPeer("nginx"); ok {
		addr, pid := startNginxPeer(b, dir, bin, origin)
		targets = append(targets, target{"nginx", addr, pid})
	}
	for _, t := range targets {
		waitLean(b, t.addr)
		leanload.Load(b, t.addr, hostname, 64, 2000) // warm up
	}
	const rounds = 5
	rps := map[string][]float64{}
	p50 := map[string][]float64{}
	p99 := map[string][]float64{}
	cpu := map[string]time.Duration{} // the proxy's CPU time, its children's too
	served := map[string]int{}
	b.ResetTimer()
	for range rounds {
		for _, t := range targets {
			n := max(b.N/rounds, 640)
			before := benchproc.TreeCPU(t.pid)
			r, l50, l99 := leanload.Load(b, t.addr, hostname, 64, n)
			cpu[t.name] += benchproc.TreeCPU(t.pid) - before
			served[t.name] += n
			rps[t.name] = append(rps[t.name], r)
			p50[t.name] = append(p50[t.name], float64(l50))
			p99[t.name] = append(p99[t.name], float64(l99))
		}
	}
	b.StopTimer()
	for _, t := range targets {
		if t.name == "vigil" {
			continue
		}
		b.ReportMetric(benchproc.MedianRatio(rps["vigil"], rps[t.name]), "vigil/"+t.name+"-rps")
		b.ReportMetric(benchproc.MedianRatio(p50[t.name], p50["vigil"]), t.name+"/vigil-p50")
		b.ReportMetric(benchproc.MedianRatio(p99[t.name], p99["vigil"]), t.name+"/vigil-p99")
	}
	for _, t := range targets {
		if t.pid != 0 && cpu[t.name] > 0 {
			b.ReportMetric(float64(cpu[t.name].Nanoseconds())/float64(served[t.name])/1e3, t.name+"-cpu-µs/req")
		}
	}

	b.ReportMetric(benchproc.Median(rps["vigil"]), "vigil-rps")
	b.ReportMetric(benchproc.Median(p99["vigil"])/1e3, "vigil-p99-µs")
}

func leanSnapshot(origin string) *publication.Snapshot {
	return &publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: hostname, Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: "http://" + origin, State: "healthy"}}}}}
}

// startLeanProxy runs vigil-node's proxy (its Server, as -proxy-listen) in
// a process of its own, as HAProxy and nginx run (TestLeanProxyProcess),
// with env added to its environment (VIGIL_LEAN_PROXY_POLLER=NAME:
// proxy.Options.Poller; GOMAXPROCS=N). It returns the proxy's address and
// process id.
func startLeanProxy(b *testing.B, origin string, env ...string) (string, int) {
	return benchproc.Start(b, "TestLeanProxyProcess", benchproc.Options{
		Env:  append([]string{"VIGIL_LEAN_PROXY_ORIGIN=" + origin}, env...),
		Wrap: func(bin string, args []string) (string, []string) { return pinned(bin, args...) },
	})
}

// Environments of startLeanProxy: the proxy with a goroutine per
// connection, on the FIFO poller and on Go's.
const (
	fifoPoller = "VIGIL_LEAN_PROXY_POLLER=" + proxy.PollerFIFO
	goPoller   = "VIGIL_LEAN_PROXY_POLLER=" + proxy.PollerGo
)

// pinned runs bin with args on the CPUs VIGIL_BENCH_PROXY_CPUS names
// (taskset's list, e.g. "1"), when it is set and taskset is installed: each
// proxy then has its cores to itself, and the load generator (run apart,
// e.g. under taskset -c 0, as make bench-ratios does) does not take them.
func pinned(bin string, args ...string) (string, []string) {
	cpus := os.Getenv("VIGIL_BENCH_PROXY_CPUS")
	if cpus == "" {
		return bin, args
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		return bin, args
	}
	return taskset, append([]string{"-c", cpus, bin}, args...)
}

// TestLeanProxyProcess is BenchmarkEdgeLean's proxy process; run alone,
// it skips.
func TestLeanProxyProcess(t *testing.T) {
	origin := os.Getenv("VIGIL_LEAN_PROXY_ORIGIN")
	if origin == "" {
		t.Skip("the proxy process of BenchmarkEdgeLean, which starts it")
	}
	poller, loops := os.Getenv("VIGIL_LEAN_PROXY_POLLER"), 0
	if (poller == "" || poller == proxy.PollerLoop) && os.Getenv("GOMAXPROCS") == "" {
		loops = proxy.SpareProc() // as vigil-node does
	}
	p, err := proxy.New(proxy.Options{Poller: poller, Loops: loops})
	if err != nil {
		t.Fatal(err)
	}
	p.SetSnapshot(leanSnapshot(origin))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := p.NewServer(0, 0)
	go func() { _ = s.Serve(ln) }()
	benchproc.Announce(ln.Addr().String())
	_ = s.Close()
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
