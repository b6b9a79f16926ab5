package benchproc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Options of Start.
type Options struct {
	// Env is added to the process's environment (the server's settings).
	Env []string
	// Args are added to its command line (e.g. -test.cpuprofile=FILE).
	Args []string
	// Wrap, when set, rewrites the command (e.g. through taskset).
	Wrap func(bin string, args []string) (string, []string)
}

// Start runs the test binary again with -test.run=^test$ and returns the
// address the process announced and its process id. The process is stopped
// at the end of tb; a failure to start, or to announce, fails tb.
func Start(tb testing.TB, test string, opts Options) (string, int) {
	tb.Helper()
	bin, args := os.Args[0], append([]string{"-test.run=^" + test + "$"}, opts.Args...)
	if opts.Wrap != nil {
		bin, args = opts.Wrap(bin, args)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), opts.Env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", test, err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close() // Announce returns when its stdin does
		if err := cmd.Wait(); err != nil {
			tb.Errorf("the %s process: %v", test, err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		tb.Fatalf("the %s process said %q (%v)", test, line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }() // the test framework's last words
	return addr, cmd.Process.Pid
}

// Announce is the server process's side: it tells Start the address the
// server listens on, and returns when Start's benchmark ends.
func Announce(addr string) {
	fmt.Println("listening on", addr)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// TreeCPU is the user and system CPU time of process pid and its
// descendants (HAProxy's, nginx's and NSD's workers), from /proc; 0 when
// pid is 0 or /proc cannot tell.
func TreeCPU(pid int) time.Duration {
	var total int64
	for _, p := range tree(pid) {
		total += p.ticks
	}
	return time.Duration(total) * time.Second / 100 // USER_HZ
}

// TreeWait is how long the threads of process pid and of its descendants
// have waited, runnable, for a CPU (the second field of each thread's
// /proc schedstat): on shared cores, what a proxy's tail latency is made
// of besides its own work. 0 when pid is 0 or /proc cannot tell; threads
// that have ended are not counted.
func TreeWait(pid int) time.Duration {
	var total int64
	for _, p := range tree(pid) {
		dir := "/proc/" + strconv.Itoa(p.pid) + "/task/"
		tasks, _ := os.ReadDir(dir)
		for _, t := range tasks {
			b, err := os.ReadFile(dir + t.Name() + "/schedstat")
			if f := strings.Fields(string(b)); err == nil && len(f) > 1 {
				w, _ := strconv.ParseInt(f[1], 10, 64)
				total += w
			}
		}
	}
	return time.Duration(total)
}

// proc is a process of a tree: its id and its user and system CPU ticks.
type proc struct {
	pid   int
	ticks int64
}

// tree lists process pid and its descendants from /proc (none for pid 0).
func tree(pid int) []proc {
	if pid == 0 {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent, all := map[int]int{}, []proc{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := bytes.LastIndexByte(stat, ')') // comm may hold spaces: count the fields after it
		if err != nil || i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:])) // state ppid ... utime (12th) stime (13th)
		if len(f) < 13 {
			continue
		}
		parent[p], _ = strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		all = append(all, proc{p, ut + st})
	}
	var out []proc
	for _, p := range all {
		for q := p.pid; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// Steal is a reading of the machine's CPU time counters (/proc/stat).
type Steal struct {
	steal, total int64 // clock ticks, all CPUs
}

// ReadSteal reads the counters (zero where /proc cannot tell).
func ReadSteal() Steal {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Steal{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return Steal{}
	}
	var s Steal
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i < 8 { // guest time is counted in user already
			s.total += n
		}
		if i == 7 {
			s.steal = n
		}
	}
	return s
}

// Since is the share of the CPU time since before that the hypervisor
// gave to others (steal time), in percent: on a virtual machine, what can
// make a run slower or its tail longer whatever runs in it. ok is false
// when it cannot tell.
func (s Steal) Since(before Steal) (pct float64, ok bool) {
	if before.total == 0 || s.total <= before.total {
		return 0, false
	}
	return 100 * float64(s.steal-before.steal) / float64(s.total-before.total), true
}

// Median is the median of v (v is not changed).
func Median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// MedianRatio is the median of a[i]/b[i]: the ratio of two targets measured
// in the same rounds, each round's pair side by side.
func MedianRatio(a, b []float64) float64 {
	return Median(ratios(a, b))
}

// QuartileRatios are the first and third quartiles of a[i]/b[i] (by the
// nearest rank): how far the rounds' ratios spread about MedianRatio.
func QuartileRatios(a, b []float64) (q1, q3 float64) {
	rs := ratios(a, b)
	slices.Sort(rs)
	return rs[(len(rs)-1)/4], rs[len(rs)-1-(len(rs)-1)/4]
}

func ratios(a, b []float64) []float64 {
	rs := make([]float64, len(a))
	for i := range a {
		rs[i] = a[i] / b[i]
	}
	return rs
}
