package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

const confirmHCL = `
control {
  round_interval = "30s"
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check { confirm_interval = "3s" }
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = "http://127.0.0.1:2"
    level   = 2
  }
}
site "api" {
  hostname = "api.example.com"
  origin "a1" { address = "http://127.0.0.1:3" }
  origin "b1" {
    address = "http://127.0.0.1:4"
    level   = 2
  }
}
`

// roundLog is what Run did: each round's kind, start (on the bubble's
// fake clock, as seconds since the test began) and sites.
type roundLog struct {
	mu     sync.Mutex
	t0     time.Time
	rounds []ranRound
}

type ranRound struct {
	at      time.Duration
	confirm bool
	probed  int
	seq     uint64
}

func (l *roundLog) add(res engine.RoundResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rounds = append(l.rounds, ranRound{at: time.Since(l.t0) - res.Duration, confirm: res.Confirm, probed: res.Probed, seq: res.Round})
}

func (l *roundLog) get() []ranRound {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.rounds)
}

// hangingConfirmSource is enginetest's source that, while gated, blocks a ballot
// for www alone (a confirmation) until its context ends.
type hangingConfirmSource struct {
	*enginetest.Source
	mu    sync.Mutex
	gated bool
}

func (g *hangingConfirmSource) Vote(ctx context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	g.mu.Lock()
	gated := g.gated
	g.mu.Unlock()
	if gated && len(b.Targets) > 0 && b.Targets[0].Site == "www" && len(b.Targets) == 2 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return g.Source.Vote(ctx, b)
}

// runConfirmEngine starts an engine of confirmHCL in the bubble and Run
// in a goroutine; stop ends both.
func runConfirmEngine(t *testing.T, src engine.VoteSource, reg *prometheus.Registry) (e *engine.Engine, log *roundLog, stop func()) {
	t.Helper()
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	log = &roundLog{t0: time.Now()}
	e, diags := engine.New(context.Background(), enginetest.Config(t, confirmHCL), engine.Options{Store: st, Registerer: reg,
		NewSource:  func(*config.Source, string, hclog.Logger) engine.VoteSource { return src },
		AfterRound: log.add})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	return e, log, func() { cancel(); <-done; e.Close(); st.Close() }
}

// sleepTo sleeps until d after the log's start (fake time).
func sleepTo(l *roundLog, d time.Duration) {
	time.Sleep(d - time.Since(l.t0))
	synctest.Wait()
}

// TestConfirmationRounds: with confirm_interval = "3s" and round_interval
// = "30s", a down while healthy at the round of 60 s is confirmed at 63 s
// and 66 s, which fails the site over; no confirmation runs when nothing
// is in doubt, the rounds keep their times, and a site without
// confirm_interval is never confirmed. On the bubble's fake clock.
func TestConfirmationRounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := enginetest.NewSource("direct")
		reg := prometheus.NewRegistry()
		e, log, stop := runConfirmEngine(t, src, reg)
		defer stop()

		sleepTo(log, 45*time.Second) // rounds at 0 s and 30 s: all healthy
		src.SetDown("www", "a1", true)
		src.SetDown("api", "a1", true)
		sleepTo(log, 89*time.Second)

		want := []ranRound{
			{at: 0, probed: 2, seq: 1},
			{at: 30 * time.Second, probed: 2, seq: 2},
			{at: 60 * time.Second, probed: 2, seq: 3},
			{at: 63 * time.Second, confirm: true, probed: 1, seq: 4},
			{at: 66 * time.Second, confirm: true, probed: 1, seq: 5},
		}
		if got := log.get(); !slices.Equal(got, want) {
			t.Fatalf("rounds\n got %+v\nwant %+v", got, want)
		}
		if lvl := e.Views().Site("www").Level; lvl != 2 {
			t.Fatalf("www on level %d after two confirmations, want 2", lvl)
		}
		if lvl := e.Views().Site("api").Level; lvl != 1 {
			t.Fatalf("api (no confirm_interval) on level %d after one round down, want 1", lvl)
		}
		evs, err := e.Events(context.Background(), 0, "www", 100)
		if err != nil {
			t.Fatal(err)
		}
		var switched *store.Event
		for i := range evs {
			if evs[i].Event.Kind == decide.KindLevelSwitched {
				switched = &evs[i]
			}
		}
		if switched == nil || switched.Round != 5 || !switched.Time.Equal(log.t0.Add(66*time.Second).UTC()) {
			t.Fatalf("the failover should be journaled by round 5 at 66 s: %+v", switched)
		}
		if n := testutil.ToFloat64(gatherCounter(t, reg, "vigil_confirm_rounds_total")); n != 2 {
			t.Fatalf("vigil_confirm_rounds_total = %v, want 2", n)
		}
		if n := testutil.ToFloat64(gatherCounter(t, reg, "vigil_rounds_total")); n != 3 {
			t.Fatalf("vigil_rounds_total = %v, want 3 (confirmations not counted)", n)
		}

		// The round of 90 s comes on time, and finds nothing in doubt.
		sleepTo(log, 119*time.Second)
		if got := log.get(); len(got) != 6 || got[5] != (ranRound{at: 90 * time.Second, probed: 2, seq: 6}) {
			t.Fatalf("after 90 s: %+v", got)
		}
	})
}

// TestSuspectTrigger: a suspicion probes a site with confirm_interval at
// once when its last probe is older than confirm_interval, at most one a
// confirm_interval, and is ignored (and counted) for the others.
func TestSuspectTrigger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := enginetest.NewSource("direct")
		reg := prometheus.NewRegistry()
		e, log, stop := runConfirmEngine(t, src, reg)
		defer stop()

		sleepTo(log, 40*time.Second)
		src.SetDown("www", "a1", true)
		e.Suspect("www")
		e.Suspect("www") // the same, again: one confirmation
		e.Suspect("api")
		e.Suspect("nosuch")
		synctest.Wait()
		sleepTo(log, 41*time.Second)
		got := log.get()
		if len(got) != 3 || got[2] != (ranRound{at: 40 * time.Second, confirm: true, probed: 1, seq: 3}) {
			t.Fatalf("a suspicion at 40 s should confirm www at once: %+v", got)
		}
		// The down puts www in doubt: confirmed again 3 s later, and once
		// more: unhealthy, failed over, all before the round of 60 s.
		e.Suspect("www") // due at 43 s anyway: no extra round
		sleepTo(log, 59*time.Second)
		got = log.get()
		want := []time.Duration{0, 30 * time.Second, 40 * time.Second, 43 * time.Second, 46 * time.Second}
		var at []time.Duration
		for _, r := range got {
			at = append(at, r.at)
		}
		if !slices.Equal(at, want) {
			t.Fatalf("rounds at %v, want %v", at, want)
		}
		if lvl := e.Views().Site("www").Level; lvl != 2 {
			t.Fatalf("www on level %d, want 2", lvl)
		}
		if n := testutil.ToFloat64(gatherCounterLabel(t, reg, "vigil_confirm_suspects_total", "ignored")); n != 2 {
			t.Fatalf("ignored suspicions = %v, want 2 (api has no confirm_interval, nosuch is no site)", n)
		}
	})
}

// TestConfirmationNeverDelaysARound: a confirmation whose source hangs is
// cut short when the next round is due, and that round starts on time.
func TestConfirmationNeverDelaysARound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &hangingConfirmSource{Source: enginetest.NewSource("direct")}
		_, log, stop := runConfirmEngine(t, src, prometheus.NewRegistry())
		defer stop()
		sleepTo(log, 45*time.Second)
		src.SetDown("www", "a1", true)
		src.mu.Lock()
		src.gated = true
		src.mu.Unlock()
		sleepTo(log, 95*time.Second)
		var rounds []time.Duration
		hung := false
		for _, r := range log.get() {
			if !r.confirm {
				rounds = append(rounds, r.at)
			}
			hung = hung || (r.confirm && r.at == 63*time.Second)
		}
		if !hung {
			t.Fatalf("no confirmation started at 63 s: %+v", log.get())
		}
		if want := []time.Duration{0, 30 * time.Second, 60 * time.Second, 90 * time.Second}; !slices.Equal(rounds, want) {
			t.Fatalf("rounds at %v, want %v: a hung confirmation delayed a round", rounds, want)
		}
	})
}

// gatherCounterLabel finds a counter by name and one label value.
func gatherCounterLabel(t *testing.T, reg *prometheus.Registry, name, value string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == value {
					return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: "copy"}, func() float64 { return m.GetCounter().GetValue() })
				}
			}
		}
	}
	t.Fatalf("metric %s{%s} not registered", name, value)
	return nil
}

// TestConfirmBudgetDefers: with a budget of one site a confirmation
// round, three sites in doubt are confirmed one at a time, the rest
// deferred and counted, and the round after them still probes all three.
func TestConfirmBudgetDefers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := enginetest.Config(t, `
control {
  round_interval  = "30s"
  sites_per_round = 10
  confirm_budget  = 10
}
source "direct" { plugin = "vigil-source-direct" }
site "s0" {
  hostname = "s0.example.com"
  health_check { confirm_interval = "3s" }
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = "http://127.0.0.1:2"
    level   = 2
  }
}
site "s1" {
  hostname = "s1.example.com"
  health_check { confirm_interval = "3s" }
  origin "a1" { address = "http://127.0.0.1:3" }
  origin "b1" {
    address = "http://127.0.0.1:4"
    level   = 2
  }
}
site "s2" {
  hostname = "s2.example.com"
  health_check { confirm_interval = "3s" }
  origin "a1" { address = "http://127.0.0.1:5" }
  origin "b1" {
    address = "http://127.0.0.1:6"
    level   = 2
  }
}
`)
		src := enginetest.NewSource("direct")
		st, err := store.Open(t.TempDir(), 0)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		log := &roundLog{t0: time.Now()}
		e, diags := engine.New(context.Background(), cfg, engine.Options{Store: st, Registerer: reg,
			NewSource:  func(*config.Source, string, hclog.Logger) engine.VoteSource { return src },
			AfterRound: log.add})
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); e.Run(ctx) }()
		defer func() { cancel(); <-done; e.Close(); st.Close() }()

		sleepTo(log, 45*time.Second)
		for _, s := range []string{"s0", "s1", "s2"} {
			src.SetDown(s, "a1", true)
		}
		sleepTo(log, 91*time.Second)
		t.Logf("rounds: %+v", log.get())
		confirms := 0
		var rounds []ranRound
		for _, r := range log.get() {
			if r.confirm {
				confirms++
				if r.probed != 1 {
					t.Fatalf("a confirmation probed %d sites; the budget is 1: %+v", r.probed, log.get())
				}
			} else {
				rounds = append(rounds, r)
			}
		}
		if confirms < 3 {
			t.Fatalf("%d confirmations, want at least 3 (one per site): %+v", confirms, log.get())
		}
		if len(rounds) != 4 || rounds[3].at != 90*time.Second || rounds[3].probed != 3 {
			t.Fatalf("the rounds should keep their time and size: %+v", rounds)
		}
		if n := testutil.ToFloat64(gatherCounter(t, reg, "vigil_confirm_deferred_total")); n < 2 {
			t.Fatalf("vigil_confirm_deferred_total = %v, want at least 2", n)
		}
		for _, s := range []string{"s0", "s1", "s2"} {
			if lvl := e.Views().Site(s).Level; lvl != 2 {
				t.Errorf("%s on level %d after the round of 90 s, want 2", s, lvl)
			}
		}
	})
}
