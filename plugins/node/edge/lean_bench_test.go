package edge_test

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
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
// it (net/http), HAProxy and nginx (each skipped when absent), each in a
// process of its own, and the origin directly. They run
// in alternation, 5 rounds, in one run; the ratios are medians over the
// rounds (VIGIL_BENCH_IN_PROCESS=1
// adds the proxy inside the benchmark's own process, sharing its scheduler
// with the load and the origin, as "vigil-in-process"; with
// VIGIL_BENCH_PROXY_CPUS each proxy runs on those CPUs only, see pinned):
//
//	go test -run '^$' -bench EdgeLean -benchtime 60000x ./plugins/node/edge
//
// VIGIL_LEAN_PROXY_CPUPROFILE=PATH writes the CPU profile of vigil's proxy
// process to PATH (VIGIL_BENCH_ONLY=none measures it alone).
//
// VIGIL_BENCH_BASELINE=PATH adds "vigil-baseline", the proxy process of
// another build of this package's tests (go test -c -o PATH
// ./plugins/node/edge at the commit to compare with), here and in
// BenchmarkEdgeWrk.
//
// vigil/haproxy-rps is vigil-node's throughput over HAProxy's (a figure
// reported, no longer a goal: issue 30 left the data plane's speed to the
// edge software); haproxy/vigil-p50 and -p99 above 1 mean
// vigil-node's latency is lower; NAME-cpu-µs/req is the CPU time (user and
// system, its worker processes' too) each proxy spent per request, and
// NAME-wait-µs/req how long its threads waited, runnable, for a CPU per
// request (what scheduling adds to its latency on shared cores).
func BenchmarkEdgeLean(b *testing.B) {
	origin := leanload.Origin(b)
	targets := append([]benchTarget{{"direct", origin, 0}}, vigilTargets(b, origin)...)
	if os.Getenv("VIGIL_BENCH_IN_PROCESS") != "" {
		p, err := proxy.New(proxy.Options{})
		if err != nil {
			b.Fatal(err)
		}
		p.SetSnapshot(leanSnapshot(origin))
		targets = append(targets, benchTarget{"vigil-in-process", leanload.ServeOn(b, p.NewServer(0, 0)), 0})
	}
	targets = onlyTargets(append(targets, peerTargets(b, b.TempDir(), origin)...))
	for _, t := range targets {
		waitLean(b, t.addr)
		leanload.Load(b, t.addr, hostname, 64, 2000) // warm up
	}
	const rounds = 5
	runs := newEdgeRuns()
	b.ResetTimer()
	for round := range rounds {
		for _, t := range inTurn(targets, round) {
			n := max(b.N/rounds, 640)
			before, waited := benchproc.TreeCPU(t.pid), benchproc.TreeWait(t.pid)
			r, l50, l99 := leanload.Load(b, t.addr, hostname, 64, n)
			runs.add(t, r, l50, l99, n, benchproc.TreeCPU(t.pid)-before, benchproc.TreeWait(t.pid)-waited)
		}
	}
	b.StopTimer()
	runs.report(b, targets)
}

// benchTarget is what a comparison loads: a proxy, or the origin, and its
// process, whose CPU time is counted (0: none).
type benchTarget struct {
	name, addr string
	pid        int
}

// vigilTargets starts vigil-node's proxy ("vigil") in front of origin.
func vigilTargets(b *testing.B, origin string) []benchTarget {
	addr, pid := startLeanProxy(b, origin)
	out := []benchTarget{{"vigil", addr, pid}}
	if bin := os.Getenv("VIGIL_BENCH_BASELINE"); bin != "" {
		// The same proxy process from another build: a change measured
		// side by side with the code before it.
		addr, pid := benchproc.Start(b, "TestLeanProxyProcess", benchproc.Options{
			Env:  []string{"VIGIL_LEAN_PROXY_ORIGIN=" + origin, "VIGIL_LEAN_PROXY_CPUPROFILE="},
			Wrap: func(_ string, args []string) (string, []string) { return pinned(bin, args...) },
		})
		out = append(out, benchTarget{"vigil-baseline", addr, pid})
	}
	return out
}

// peerTargets starts HAProxy and nginx in front of origin, those installed.
func peerTargets(b *testing.B, dir, origin string) []benchTarget {
	var out []benchTarget
	if bin, ok := lookPeer("haproxy"); ok {
		addr, pid := startHAProxyPeer(b, dir, bin, origin)
		out = append(out, benchTarget{"haproxy", addr, pid})
	}
	if bin, ok := lookPeer("nginx"); ok {
		addr, pid := startNginxPeer(b, dir, bin, origin)
		out = append(out, benchTarget{"nginx", addr, pid})
	}
	return out
}

// onlyTargets keeps vigil and the targets VIGIL_BENCH_ONLY names (a comma
// list), or all of them when it is not set: a shorter run to compare a
// change with one peer.
func onlyTargets(targets []benchTarget) []benchTarget {
	only := os.Getenv("VIGIL_BENCH_ONLY")
	if only == "" {
		return targets
	}
	keep := map[string]bool{"vigil": true}
	for _, n := range strings.Split(only, ",") {
		keep[strings.TrimSpace(n)] = true
	}
	var out []benchTarget
	for _, t := range targets {
		if keep[t.name] {
			out = append(out, t)
		}
	}
	return out
}

// inTurn is the order of the targets in round i: as given, and reversed
// every other round, so that a drift in the machine's speed during a round
// (this one's virtual CPUs have slow spells; see host-steal-%) is not
// always charged to the same targets.
func inTurn(targets []benchTarget, i int) []benchTarget {
	if i%2 == 0 {
		return targets
	}
	out := slices.Clone(targets)
	slices.Reverse(out)
	return out
}

// edgeRuns holds each target's rounds.
type edgeRuns struct {
	rps, p50, p99 map[string][]float64
	cpu           map[string]time.Duration // its process's CPU time, its children's too
	wait          map[string]time.Duration // how long their threads waited for a CPU
	served        map[string]int
	steal         benchproc.Steal // at the start
}

func newEdgeRuns() *edgeRuns {
	return &edgeRuns{rps: map[string][]float64{}, p50: map[string][]float64{}, p99: map[string][]float64{},
		cpu: map[string]time.Duration{}, wait: map[string]time.Duration{}, served: map[string]int{}, steal: benchproc.ReadSteal()}
}

// add records a round of t: its throughput and latencies, the requests it
// served, the CPU time its process spent and how long its threads waited
// for a CPU.
func (r *edgeRuns) add(t benchTarget, rps float64, p50, p99 time.Duration, served int, cpu, wait time.Duration) {
	r.rps[t.name] = append(r.rps[t.name], rps)
	r.p50[t.name] = append(r.p50[t.name], float64(p50))
	r.p99[t.name] = append(r.p99[t.name], float64(p99))
	r.served[t.name] += served
	r.cpu[t.name] += cpu
	r.wait[t.name] += wait
}

// report gives each target's medians of ratios to vigil's (throughput:
// vigil's over its; latencies: its over vigil's, so above 1 is vigil lower)
// and the CPU time per request of each with a process.
func (r *edgeRuns) report(b *testing.B, targets []benchTarget) {
	for _, t := range targets {
		if t.name == "vigil" {
			continue
		}
		b.ReportMetric(benchproc.MedianRatio(r.rps["vigil"], r.rps[t.name]), "vigil/"+t.name+"-rps")
		b.ReportMetric(benchproc.MedianRatio(r.p50[t.name], r.p50["vigil"]), t.name+"/vigil-p50")
		b.ReportMetric(benchproc.MedianRatio(r.p99[t.name], r.p99["vigil"]), t.name+"/vigil-p99")
		if len(r.p99[t.name]) >= 8 {
			// Enough rounds to tell their spread.
			q1, q3 := benchproc.QuartileRatios(r.p99[t.name], r.p99["vigil"])
			b.ReportMetric(q1, t.name+"/vigil-p99-q1")
			b.ReportMetric(q3, t.name+"/vigil-p99-q3")
		}
	}
	for _, t := range targets {
		if t.pid != 0 && r.cpu[t.name] > 0 && r.served[t.name] > 0 {
			b.ReportMetric(float64(r.cpu[t.name].Nanoseconds())/float64(r.served[t.name])/1e3, t.name+"-cpu-µs/req")
			b.ReportMetric(float64(r.wait[t.name].Nanoseconds())/float64(r.served[t.name])/1e3, t.name+"-wait-µs/req")
		}
	}
	if pct, ok := benchproc.ReadSteal().Since(r.steal); ok {
		b.ReportMetric(pct, "host-steal-%")
	}
	b.ReportMetric(benchproc.Median(r.rps["vigil"]), "vigil-rps")
	b.ReportMetric(benchproc.Median(r.p99["vigil"])/1e3, "vigil-p99-µs")
}

func leanSnapshot(origin string) *publication.Snapshot {
	return &publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: hostname, Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: "http://" + origin, State: "healthy"}}}}}
}

// startLeanProxy runs vigil-node's proxy (its Server, as -proxy-listen) in
// a process of its own, as HAProxy and nginx run (TestLeanProxyProcess),
// with env added to its environment (GOMAXPROCS=N, say). It returns the proxy's address and
// process id.
func startLeanProxy(b *testing.B, origin string, env ...string) (string, int) {
	return benchproc.Start(b, "TestLeanProxyProcess", benchproc.Options{
		Env:  append([]string{"VIGIL_LEAN_PROXY_ORIGIN=" + origin}, env...),
		Wrap: func(bin string, args []string) (string, []string) { return pinned(bin, args...) },
	})
}

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
	p, err := proxy.New(proxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.SetSnapshot(leanSnapshot(origin))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("VIGIL_LEAN_PROXY_CPUPROFILE"); path != "" {
		// The proxy's own profile under the benchmark's load.
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
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
