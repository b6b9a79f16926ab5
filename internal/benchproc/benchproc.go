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
	if pid == 0 {
		return 0
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	parent, ticks := map[int]int{}, map[int]int64{}
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
		ticks[p] = ut + st
	}
	var total int64
	for p, n := range ticks {
		for q := p; q > 1; q = parent[q] {
			if q == pid {
				total += n
				break
			}
		}
	}
	return time.Duration(total) * time.Second / 100 // USER_HZ
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
	rs := make([]float64, len(a))
	for i := range a {
		rs[i] = a[i] / b[i]
	}
	return Median(rs)
}
