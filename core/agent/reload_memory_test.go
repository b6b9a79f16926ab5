package agent_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
)

// TestReloadMemory: after a reload that changes 1% of 5,000 sites and
// adds 200, the heap the agent holds is close to what a fresh start with
// the new file holds, not about twice (a second copy of the configuration
// and of the fleet). A memory bound, not a time bound: the heap is
// measured after a full collection, and the old configuration may take a
// moment to be dropped (the history writer maps the new fleet), so the
// test waits for that, with a deadline that only catches a leak.
func TestReloadMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 sites: not in -short")
	}
	const sites, added = 5000, 200
	changed := func(i int) bool { return i%100 == 7 }
	f := newFleetFile(t)

	// A fresh start with the new file, from its cache as an agent starts.
	f.write(t, sites+added, changed)
	warm(t, f.path)
	b := f.start(t)
	fresh := liveHeap()
	_ = b.Stop()
	b = nil

	// An agent on the old file, started from its cache, reloads the new
	// one.
	f.write(t, sites, nil)
	warm(t, f.path)
	a := f.start(t)
	t.Cleanup(func() { _ = a.Stop() })
	before := liveHeap()
	f.write(t, sites+added, changed)
	if _, err := a.ReloadFile("test"); err != nil {
		t.Fatal(err)
	}
	if n := a.Engine().Views().Len(); n != sites+added {
		t.Fatalf("%d sites after the reload, want %d", n, sites+added)
	}
	const bound = 1.5
	deadline := time.Now().Add(time.Minute)
	for {
		after := liveHeap()
		ratio := float64(after.inuse) / float64(fresh.inuse)
		if ratio < bound {
			t.Logf("heap: %s before the reload, %s after it, %s after a fresh start: %.2f times", before, after, fresh, ratio)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("heap in use after the reload %s, %.2f times a fresh start's %s (before the reload: %s); want under %.1f times",
				after, ratio, fresh, before, bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// warm loads path once so that config.cache holds it, and drops what it
// loaded: the next LoadCached starts from the cache, as a new process
// would.
func warm(t *testing.T, path string) {
	t.Helper()
	if _, diags := config.LoadCached(path); diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	runtime.GC()
}
