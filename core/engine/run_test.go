package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

// slowSource takes longer than round_interval to vote and records whether
// two calls ever overlapped.
type slowSource struct {
	*enginetest.Source
	delay    time.Duration
	inFlight atomic.Int32
	overlap  atomic.Bool
	calls    chan struct{}
}

func (s *slowSource) Vote(ctx context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	if s.inFlight.Add(1) > 1 {
		s.overlap.Store(true)
	}
	defer s.inFlight.Add(-1)
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
	}
	defer func() { s.calls <- struct{}{} }()
	return s.Source.Vote(ctx, b)
}

func TestLateRoundsDelayTheNextAndAreCounted(t *testing.T) {
	cfg := enginetest.Config(t, `
control { round_interval = "50ms" }
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}`)
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	src := &slowSource{Source: enginetest.NewSource("direct"), delay: 120 * time.Millisecond, calls: make(chan struct{}, 16)}
	reg := prometheus.NewRegistry()
	e, diags := engine.New(context.Background(), cfg, engine.Options{Store: st, Registerer: reg,
		NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource { return src }})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait(); e.Close(); st.Close() })

	for i := 0; i < 3; i++ {
		select {
		case <-src.calls:
		case <-time.After(time.Minute):
			t.Fatal("rounds stopped")
		}
	}
	cancel()
	wg.Wait()
	if src.overlap.Load() {
		t.Fatal("two rounds overlapped")
	}
	late := testutil.ToFloat64(gatherCounter(t, reg, "vigil_rounds_late_total"))
	if late < 2 {
		t.Fatalf("vigil_rounds_late_total = %v after three rounds each longer than round_interval; want >= 2", late)
	}
}

// gatherCounter finds a registered counter by name.
func gatherCounter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: "copy"}, func() float64 {
				return mf.GetMetric()[0].GetCounter().GetValue()
			})
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}
