package edge

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// watchedDriver is a Driver and a Watcher: restart() plays the edge
// reloading.
type watchedDriver struct {
	mu      sync.Mutex
	applied []uint64
	changed func()
}

func (d *watchedDriver) Name() string { return "watched" }

func (d *watchedDriver) Apply(_ context.Context, v *View) (Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.applied = append(d.applied, v.Version)
	return Result{Changes: 1}, nil
}

func (d *watchedDriver) Watch(ctx context.Context, changed func()) {
	d.mu.Lock()
	d.changed = changed
	d.mu.Unlock()
	<-ctx.Done()
}

func (d *watchedDriver) applies() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.applied)
}

func (d *watchedDriver) restart(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	f := d.changed
	d.mu.Unlock()
	if f == nil {
		t.Fatal("the Hub did not run Watch")
	}
	f()
}

// TestHubWatcher: when a Watcher says its edge restarted, the Hub applies
// the newest View again at once, not at the next resync, and counts the
// restart.
func TestHubWatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &watchedDriver{}
		reg := prometheus.NewRegistry()
		h, err := NewHub(HubOptions{Drivers: []Driver{d}, Resync: time.Hour, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); h.Run(ctx) }()
		h.SetSnapshot(&publication.Snapshot{Version: 7, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
			Origins: []publication.Origin{{Name: "a1", Address: "http://192.0.2.1", State: "healthy"}}}}})
		synctest.Wait()
		if n := d.applies(); n != 1 {
			t.Fatalf("%d applies after the publication, want 1", n)
		}
		for i := range 3 {
			d.restart(t)
			synctest.Wait() // no time passes: the resync (an hour) is not what applies
			if n := d.applies(); n != 2+i {
				t.Fatalf("restart %d: %d applies, want %d", i+1, n, 2+i)
			}
		}
		if got := testutil.ToFloat64(h.m.restarts.WithLabelValues("watched")); got != 3 {
			t.Errorf("vigil_node_edge_restarts_total = %v, want 3", got)
		}
		if st := h.Status()[0]; st.Applied != 7 || st.Err != nil {
			t.Errorf("status %+v, want version 7 applied", st)
		}
		cancel()
		<-done
	})
}
