//go:build linux

package edge_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/benchproc"
	"github.com/vigilcdn/vigil/plugins/node/internal/leanload"
)

// BenchmarkEdgeWrk is BenchmarkEdgeLean with wrk as the load, the tool
// issue 19 measured with (wrk -t2 -c64 on the same 2 cores): vigil-node's
// proxy, HAProxy, nginx, and the floor of a Go proxy that does no HTTP at
// all (floor_bench_test.go): "go-forwarder", a goroutine copying each way.
// Each runs in a process of its own, in alternation, 3 rounds
// (VIGIL_BENCH_WRK_ROUNDS) of VIGIL_BENCH_WRK_DURATION (3s) each;
// VIGIL_BENCH_ONLY=haproxy,nginx keeps vigil and those alone (in
// EdgeLean too). It skips without wrk (apt-get install wrk). wrk is
// written in C and keeps its two threads busy, which is the worst case for
// a Go process's scheduling when they share cores: the figures differ from
// EdgeLean's, whose load is Go and lighter.
//
//	go test -run '^$' -bench EdgeWrk -benchtime 1x ./plugins/node/edge
func BenchmarkEdgeWrk(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Skip("wrk is not installed (apt-get install wrk)")
	}
	duration := os.Getenv("VIGIL_BENCH_WRK_DURATION")
	if duration == "" {
		duration = "3s"
	}
	origin := leanload.Origin(b)
	targets := vigilTargets(b, origin)
	fwdAddr, fwdPid := startFloor(b, "TestGoForwarderProcess", origin)
	targets = append(targets, benchTarget{"go-forwarder", fwdAddr, fwdPid})
	targets = onlyTargets(append(targets, peerTargets(b, b.TempDir(), origin)...))
	for _, t := range targets {
		waitLean(b, t.addr)
	}
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("VIGIL_BENCH_WRK_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	runs := newEdgeRuns()
	b.ResetTimer()
	for round := range rounds {
		for _, t := range inTurn(targets, round) {
			before, waited := benchproc.TreeCPU(t.pid), benchproc.TreeWait(t.pid)
			out, err := exec.Command(wrk, "-t2", "-c64", "-d"+duration, "--latency", "-H", "Host: "+hostname, "http://"+t.addr+"/").CombinedOutput()
			cpu, wait := benchproc.TreeCPU(t.pid)-before, benchproc.TreeWait(t.pid)-waited
			if err != nil {
				b.Fatalf("wrk on %s: %v\n%s", t.name, err, out)
			}
			r, err := parseWrk(string(out))
			if err != nil {
				b.Fatalf("wrk on %s: %v\n%s", t.name, err, out)
			}
			runs.add(t, r.rps, r.p50, r.p99, r.requests, cpu, wait)
		}
	}
	b.StopTimer()
	runs.report(b, targets)
}

// wrkResult is what BenchmarkEdgeWrk takes from wrk's report.
type wrkResult struct {
	requests int
	rps      float64
	p50, p99 time.Duration
}

var (
	wrkRequests = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	wrkRate     = regexp.MustCompile(`(?m)^Requests/sec:\s*([0-9.]+)`)
	wrkLatency  = regexp.MustCompile(`(?m)^\s*(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
)

// parseWrk reads wrk --latency's report; any failed request (a socket
// error, an answer other than 2xx or 3xx) is an error.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	if strings.Contains(out, "Socket errors") || strings.Contains(out, "Non-2xx or 3xx") {
		return r, fmt.Errorf("requests failed")
	}
	m := wrkRequests.FindStringSubmatch(out)
	n := wrkRate.FindStringSubmatch(out)
	if m == nil || n == nil {
		return r, fmt.Errorf("no request count or rate in wrk's report")
	}
	r.requests, _ = strconv.Atoi(m[1])
	r.rps, _ = strconv.ParseFloat(n[1], 64)
	for _, l := range wrkLatency.FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(l[2], 64)
		if err != nil {
			return r, fmt.Errorf("latency %q: %w", l[0], err)
		}
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[l[3]]
		d := time.Duration(v * float64(unit))
		if l[1] == "50" {
			r.p50 = d
		} else {
			r.p99 = d
		}
	}
	if r.p50 == 0 || r.p99 == 0 {
		return r, fmt.Errorf("no latency distribution in wrk's report (--latency)")
	}
	return r, nil
}

func TestParseWrk(t *testing.T) {
	const report = `Running 3s test @ http://127.0.0.1:40000/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.23ms    1.10ms  20.00ms   90.00%
    Req/Sec    28.00k     1.00k   30.00k    70.00%
  Latency Distribution
     50%  831.00us
     75%    1.00ms
     90%    1.33ms
     99%    2.00ms
  167000 requests in 3.00s, 190.00MB read
Requests/sec:  55666.67
Transfer/sec:     63.33MB
`
	tests := []struct {
		name, out string
		want      wrkResult
		wantErr   bool
	}{
		{name: "a report", out: report, want: wrkResult{requests: 167000, rps: 55666.67, p50: 831 * time.Microsecond, p99: 2 * time.Millisecond}},
		{name: "socket errors", out: report + "  Socket errors: connect 0, read 3, write 0, timeout 0\n", wantErr: true},
		{name: "failed answers", out: report + "  Non-2xx or 3xx responses: 12\n", wantErr: true},
		{name: "no distribution", out: strings.Replace(report, "     99%    2.00ms\n", "", 1), wantErr: true},
		{name: "not wrk", out: "usage: wrk <options> <url>\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseWrk(tt.out)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
