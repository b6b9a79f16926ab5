package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

// fakeClock is the engine's clock in a test: it moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// timedSource is a fake source whose every Vote call takes took on the
// fake clock.
type timedSource struct {
	*enginetest.Source
	clock *fakeClock
	took  time.Duration
}

func (s *timedSource) Vote(ctx context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	s.clock.advance(s.took)
	return s.Source.Vote(ctx, b)
}

// TestSourceDurationPerRound: vigil_source_duration_seconds{source} has
// one observation a round for each source the round asked, of the time
// its Vote call took on the engine's clock; a source the round never
// reached (the one before settled everything) has its series at 0.
func TestSourceDurationPerRound(t *testing.T) {
	cfg := enginetest.Config(t, `
source "edge" { plugin = "vigil-source-node" }
source "direct" { plugin = "vigil-source-direct" }
source "last" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}`)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	edge := &timedSource{Source: enginetest.NewSource("edge"), clock: clock, took: 2 * time.Second}
	// edge abstains on everything, so every origin goes on to direct,
	// which settles it: last is never asked.
	edge.SetMute("www", "a1", true)
	edge.SetMute("www", "a2", true)
	sources := map[string]engine.VoteSource{
		"edge":   edge,
		"direct": &timedSource{Source: enginetest.NewSource("direct"), clock: clock, took: 250 * time.Millisecond},
		"last":   &timedSource{Source: enginetest.NewSource("last"), clock: clock, took: time.Hour},
	}
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, diags := engine.New(context.Background(), cfg, engine.Options{Store: st, Registerer: reg, Now: clock.Now,
		NewSource: func(c *config.Source, _ string, _ hclog.Logger) engine.VoteSource { return sources[c.Name] }})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Cleanup(func() { e.Close(); st.Close() })

	const rounds = 3
	for range rounds {
		e.RunRound(context.Background())
	}
	got := map[string][2]float64{} // source: count, sum
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "vigil_source_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			got[m.GetLabel()[0].GetValue()] = [2]float64{float64(h.GetSampleCount()), h.GetSampleSum()}
		}
	}
	for _, tc := range []struct {
		source     string
		count, sum float64
	}{
		{"edge", rounds, rounds * 2},
		{"direct", rounds, rounds * 0.25},
		{"last", 0, 0},
	} {
		t.Run(tc.source, func(t *testing.T) {
			g, ok := got[tc.source]
			if !ok {
				t.Fatalf("no vigil_source_duration_seconds{source=%q} series (have %v)", tc.source, got)
			}
			if g[0] != tc.count || g[1] != tc.sum {
				t.Errorf("count %v, sum %v s; want %v observations summing to %v s", g[0], g[1], tc.count, tc.sum)
			}
		})
	}
}
