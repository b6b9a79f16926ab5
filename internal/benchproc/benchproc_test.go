package benchproc

import (
	"net"
	"os"
	"testing"
)

// Start runs TestServerProcess, which announces a real listener; TreeCPU
// counts the CPU the test process itself has spent.
func TestStartAndTreeCPU(t *testing.T) {
	addr, pid := Start(t, "TestServerProcess", Options{Env: []string{"BENCHPROC_SERVE=1"}})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("the announced address %s: %v", addr, err)
	}
	c.Close()
	if pid <= 0 {
		t.Fatalf("pid %d", pid)
	}
	if TreeCPU(0) != 0 {
		t.Error("TreeCPU(0) is not 0")
	}
	spin := 0
	for i := range 50_000_000 {
		spin += i
	}
	_ = spin
	if cpu := TreeCPU(os.Getpid()); cpu <= 0 {
		t.Errorf("TreeCPU of this process: %v", cpu)
	}
}

// TestServerProcess is TestStartAndTreeCPU's server; run alone, it skips.
func TestServerProcess(t *testing.T) {
	if os.Getenv("BENCHPROC_SERVE") == "" {
		t.Skip("the server process of TestStartAndTreeCPU")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	Announce(ln.Addr().String())
}

func TestMedianRatio(t *testing.T) {
	for _, tt := range []struct {
		a, b []float64
		want float64
	}{
		{[]float64{2}, []float64{1}, 2},
		{[]float64{1, 9, 3}, []float64{1, 3, 1}, 3},  // ratios 1, 3, 3
		{[]float64{4, 1, 10}, []float64{2, 2, 2}, 2}, // ratios 2, 0.5, 5
	} {
		if got := MedianRatio(tt.a, tt.b); got != tt.want {
			t.Errorf("MedianRatio(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
	v := []float64{3, 1, 2}
	if Median(v) != 2 || v[0] != 3 {
		t.Errorf("Median changed its input or is wrong: %v", v)
	}
	for _, tt := range []struct {
		a      []float64
		q1, q3 float64
	}{
		{[]float64{5}, 5, 5},
		{[]float64{8, 1, 7, 2, 6, 3, 5, 4}, 2, 7}, // ranks 2 and 7 of 8
		{[]float64{9, 1, 8, 2, 7, 3, 6, 4, 5}, 3, 7},
	} {
		ones := make([]float64, len(tt.a))
		for i := range ones {
			ones[i] = 1
		}
		if q1, q3 := QuartileRatios(tt.a, ones); q1 != tt.q1 || q3 != tt.q3 {
			t.Errorf("QuartileRatios(%v) = %v, %v; want %v, %v", tt.a, q1, q3, tt.q1, tt.q3)
		}
	}
}

// TreeWait reads this process's threads' run-queue waits, which only grow;
// ReadSteal reads /proc/stat's counters, and Since gives the steal share
// of the ticks between two readings.
func TestTreeWaitAndSteal(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	w1 := TreeWait(os.Getpid())
	for i := 0; i < 1e6; i++ {
		_ = os.Getpid()
	}
	if w2 := TreeWait(os.Getpid()); w2 < w1 {
		t.Errorf("wait went from %v to %v", w1, w2)
	}
	if TreeWait(0) != 0 {
		t.Error("pid 0 waited")
	}
	if s := ReadSteal(); s.total <= 0 || s.steal < 0 || s.steal > s.total {
		t.Errorf("steal %d of %d ticks", s.steal, s.total)
	}
	for _, tc := range []struct {
		before, after Steal
		pct           float64
		ok            bool
	}{
		{Steal{10, 1000}, Steal{35, 1100}, 25, true},
		{Steal{10, 1000}, Steal{10, 1200}, 0, true},
		{Steal{10, 1000}, Steal{10, 1000}, 0, false}, // no ticks between
		{Steal{}, Steal{10, 1000}, 0, false},         // no first reading
	} {
		if pct, ok := tc.after.Since(tc.before); pct != tc.pct || ok != tc.ok {
			t.Errorf("%+v since %+v = %v, %v; want %v, %v", tc.after, tc.before, pct, ok, tc.pct, tc.ok)
		}
	}
}
