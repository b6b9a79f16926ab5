package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/agent"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/internal/benchproc"
	"github.com/vigilcdn/vigil/internal/testnet"
)

// fleetFile is a configuration of sites s000000... of two origins on
// two levels, with the sites in changed (by index) given another level-1
// address: what a reload test writes, grows and changes.
type fleetFile struct {
	dir, path, listen string
}

func newFleetFile(t testing.TB) *fleetFile {
	dir := t.TempDir()
	return &fleetFile{dir: dir, path: filepath.Join(dir, "vigil.hcl"), listen: testnet.Addr(t)}
}

// write writes sites sites, the sites changed says with another address.
func (f *fleetFile) write(t testing.TB, sites int, changed func(i int) bool) {
	t.Helper()
	var b strings.Builder
	b.Grow(sites * 200)
	fmt.Fprintf(&b, `control {
  round_interval = "1h"
  data_dir       = %q
  api { listen = %q }
}
source "direct" { plugin = "vigil-source-direct" }
`, f.dir, f.listen)
	for i := range sites {
		port := 18001
		if changed != nil && changed(i) {
			port = 18002
		}
		fmt.Fprintf(&b, `site "s%06d" {
  hostname = "s%06d.example.com"
  origin "a" { address = "http://127.0.0.1:%d" }
  origin "b" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`, i, i, port)
	}
	if err := os.WriteFile(f.path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// start starts an agent on the file (from the cache when it is current)
// with in-process sources.
func (f *fleetFile) start(t testing.TB) *agent.Agent {
	t.Helper()
	cfg, diags := config.LoadCached(f.path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	a, err := agent.Start(cfg, agent.Options{
		ConfigPath: f.path, Logger: hclog.NewNullLogger(), NewSource: enginetest.Sources{}.Factory(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// heapStats are the heap after a full collection: the live bytes (the
// live set) and the bytes of the spans they are in (HeapInuse, what the
// process holds of the heap, their free slots included).
type heapStats struct{ live, inuse uint64 }

func liveHeap() heapStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return heapStats{m.HeapAlloc, m.HeapInuse}
}

func (h heapStats) String() string {
	return fmt.Sprintf("%s live (%s in use)", mib(h.live), mib(h.inuse))
}

// rss is the process's resident memory (0 when /proc cannot tell).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// TestReloadMeasure measures (VIGIL_MEASURE=1) what a reload costs: an
// agent starts from `from` sites, the file is rewritten with `to` sites
// (some of them changed) and ReloadFile applies it. It reports the
// reload's wall time and CPU, the live heap before and after, and a
// fresh (cached) start's cost and live heap with the new file, to compare.
// VIGIL_MEASURE_PROFILE=DIR writes a CPU and a heap profile of each
// reload there.
func TestReloadMeasure(t *testing.T) {
	if os.Getenv("VIGIL_MEASURE") == "" {
		t.Skip("a measurement, not a test: set VIGIL_MEASURE=1")
	}
	if os.Getenv("VIGIL_MEASURE_PROFILE") != "" {
		runtime.MemProfileRate = 16 << 10
	}
	scale := 1
	if s := os.Getenv("VIGIL_MEASURE_SCALE"); s != "" { // divide the sizes, for a quick look
		scale, _ = strconv.Atoi(s)
	}
	for _, c := range []struct {
		name     string
		from, to int
		changed  func(int) bool
	}{
		{"grow 10k to 50k", 10000, 50000, nil},
		{"100k, one site changed", 100000, 100000, func(i int) bool { return i == 777 }},
		{"100k, 1% changed", 100000, 100000, func(i int) bool { return i%100 == 7 }},
		{"100k unchanged", 100000, 100000, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			from, to := c.from/scale, c.to/scale
			f := newFleetFile(t)
			f.write(t, from, nil)
			a := f.start(t)
			defer func() {
				if a != nil {
					_ = a.Stop()
				}
			}()
			before := liveHeap()
			heapProfile(t, "before")
			if c.name != "100k unchanged" {
				f.write(t, to, c.changed)
			}
			var stopProfile func()
			if dir := os.Getenv("VIGIL_MEASURE_PROFILE"); dir != "" {
				stopProfile = profile(t, dir, t.Name())
			}
			cpu0, t0 := benchproc.TreeCPU(os.Getpid()), time.Now()
			res, err := a.ReloadFile("measure")
			wall, cpu := time.Since(t0), benchproc.TreeCPU(os.Getpid())-cpu0
			if err != nil {
				t.Fatal(err)
			}
			if stopProfile != nil {
				stopProfile()
			}
			rssAfter := rss()
			after := liveHeap()
			heapProfile(t, "after")
			if got := a.Engine().Views().Len(); got != to {
				t.Fatalf("%d sites after the reload, want %d", got, to)
			}
			_ = a.Stop()
			a = nil // what the stopped agent held is garbage now
			afterStop := liveHeap()
			cpu1, t1 := benchproc.TreeCPU(os.Getpid()), time.Now()
			b := f.start(t)
			startWall, startCPU := time.Since(t1), benchproc.TreeCPU(os.Getpid())-cpu1
			rssFresh := rss()
			fresh := liveHeap()
			heapProfile(t, "fresh")
			_ = b.Stop()
			b = nil
			t.Logf("%s (load %s): reload %.2fs wall, %.2fs CPU; heap %s before, %s after, resident %s (fresh start with %d sites: %s, resident %s, %.2fs wall, %.2fs CPU; %s with no agent); applied %q",
				c.name, loadAverage(), wall.Seconds(), cpu.Seconds(), before, after, mib(rssAfter), to, fresh, mib(rssFresh),
				startWall.Seconds(), startCPU.Seconds(), afterStop, strings.Join(res.Applied, "; "))
		})
	}
}

// profile starts a CPU profile in dir; the function it returns stops it
// and writes a heap profile beside it.
func profile(t testing.TB, dir, name string) func() {
	t.Helper()
	name = strings.NewReplacer("/", "_", " ", "_", "%", "pc").Replace(name)
	f, err := os.Create(filepath.Join(dir, name+".cpu"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		h, err := os.Create(filepath.Join(dir, name+".heap"))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		runtime.GC()
		if err := pprof.WriteHeapProfile(h); err != nil {
			t.Fatal(err)
		}
	}
}

// heapProfile writes a heap profile of the live set to
// VIGIL_MEASURE_PROFILE/TEST.WHEN.heap, when that is set.
func heapProfile(t testing.TB, when string) {
	dir := os.Getenv("VIGIL_MEASURE_PROFILE")
	if dir == "" {
		return
	}
	name := strings.NewReplacer("/", "_", " ", "_", "%", "pc").Replace(t.Name())
	h, err := os.Create(filepath.Join(dir, name+"."+when+".heap"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(h); err != nil {
		t.Fatal(err)
	}
}
