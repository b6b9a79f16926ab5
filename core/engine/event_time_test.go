package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

// clockSource is a fake whose every vote takes a while on the engine's
// clock, as a probe round does on a loaded machine.
type clockSource struct {
	*enginetest.Source
	advance func()
}

func (s clockSource) Vote(ctx context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	s.advance()
	return s.Source.Vote(ctx, b)
}

// TestRoundEventsCarryTheRoundsStart: a round whose votes take 7 s on the
// clock journals its switch and state changes at the round's start, the
// time the status gives as the origins' since (and the history its round),
// not at the commit; an operator action carries the time it was taken.
// With commit times, a slow round's switch fell into the next round's
// second and the what-if replay put it a round late.
func TestRoundEventsCarryTheRoundsStart(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	fake := enginetest.NewSource("direct")
	factory := func(*config.Source, string, hclog.Logger) engine.VoteSource {
		return clockSource{Source: fake, advance: func() { advance(7 * time.Second) }}
	}
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e, diags := engine.New(ctx, enginetest.Config(t, rampConfig), engine.Options{Store: st, NewSource: factory, Now: clock})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Cleanup(e.Close)

	advance(30 * time.Second)
	e.RunRound(ctx)
	fake.SetDown("www", "a1", true)
	fake.SetDown("www", "a2", true)
	advance(30 * time.Second)
	started := clock()
	e.RunRound(ctx)
	if !clock().After(started) {
		t.Fatal("the slow source did not move the clock: the test proves nothing")
	}
	v := e.Views().Site("www")
	if v.Level != 2 {
		t.Fatalf("level %d after a1 and a2 went down, want 2", v.Level)
	}
	if since := v.Origins["a1"].Since; since == nil || !since.Equal(started) {
		t.Fatalf("a1 since %v, want the round's start %v", since, started)
	}
	if _, err := e.Disable(ctx, "www", "a2", "alice"); err != nil {
		t.Fatal(err)
	}
	evs, err := e.Events(ctx, 0, "www", 100)
	if err != nil {
		t.Fatal(err)
	}
	var switched, states, action int
	for _, ev := range evs {
		switch {
		case ev.Round == 0:
			action++
			if !ev.Time.Equal(clock()) {
				t.Errorf("operator event %+v at %v, want when it was taken, %v", ev.Event, ev.Time, clock())
			}
		case ev.Event.Kind == decide.KindLevelSwitched:
			switched++
			fallthrough
		case ev.Event.Kind == decide.KindOriginState && ev.Time.After(started.Add(-time.Second)):
			states++
			if !ev.Time.Equal(started) {
				t.Errorf("round %d's %s at %v, want the round's start %v", ev.Round, ev.Event.Kind, ev.Time, started)
			}
		}
	}
	if switched != 1 || states < 3 || action != 1 {
		t.Fatalf("%d switches, %d events of the failing round, %d operator events: want 1, at least 3 (a1, a2, the switch), 1\n%+v", switched, states, action, evs)
	}
}
