package engine_test

import (
	"context"
	"testing"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
)

// seen is what an observer found when it was told of a commit: the
// commit, and what the store and the hub held at that moment.
type seen struct {
	c         engine.Commit
	kinds     []decide.EventKind
	stored    int // events in the store
	published uint64
	viewLevel int
}

// TestObserverAfterDurableCommit: an observer is told of a commit only
// once it is saved and published (the events are in the store and the
// hub has the switch when it is called), a round's commit names the round,
// an action's names none, and a round whose commit failed is carried by
// the next commit that succeeds.
func TestObserverAfterDurableCommit(t *testing.T) {
	ctx := context.Background()
	st, bolt := openCounting(t, t.TempDir())
	src := enginetest.Sources{}
	e, d := engine.New(ctx, enginetest.Config(t, twoLevels), engine.Options{Store: st, NewSource: src.Factory()})
	if d.HasErrors() {
		t.Fatal(d.Error())
	}
	t.Cleanup(e.Close)
	var log []seen
	e.Observe(engine.ObserverFunc(func(c engine.Commit) {
		evs, err := bolt.Events(ctx, 0, "", 1000)
		if err != nil {
			t.Errorf("store read inside the observer: %v", err)
		}
		s := seen{c: c, stored: len(evs), published: e.Hub().Current().Version, viewLevel: c.Views.Site("www").Level}
		for _, ev := range c.Events {
			s.kinds = append(s.kinds, ev.Event.Kind)
		}
		c.Events = nil // valid only during the call
		s.c = c
		log = append(log, s)
	}))

	r1 := e.RunRound(ctx)
	if len(log) != 1 || log[0].c.Round != r1.Round || log[0].c.Probed != r1.Probed || log[0].c.Confirm {
		t.Fatalf("after round %d: observer saw %+v, want one commit of that round", r1.Round, log)
	}
	e.RunRound(ctx)
	src["direct"].SetDown("www", "a1", true)
	src["direct"].SetDown("www", "a2", true)
	e.RunRound(ctx)
	e.RunRound(ctx)

	st.fail.Store(true)
	before := len(log)
	failed := e.RunRound(ctx)
	if failed.Saved || failed.Events == 0 {
		t.Fatalf("the switch round: saved %v with %d events, want an unsaved round with events", failed.Saved, failed.Events)
	}
	if len(log) != before {
		t.Fatalf("an unsaved round was told to the observer: %+v", log[before:])
	}

	st.fail.Store(false)
	if _, err := e.Disable(ctx, "www", "a1", "test"); err != nil {
		t.Fatalf("disable: %v", err)
	}
	if len(log) != before+1 {
		t.Fatalf("the action's commit made %d observer calls, want 1", len(log)-before)
	}
	got := log[before]
	if got.c.Round != failed.Round || got.c.Probed != failed.Probed {
		t.Errorf("the commit after the failed one carries round %d (%d sites), want the unsaved round %d (%d sites)", got.c.Round, got.c.Probed, failed.Round, failed.Probed)
	}
	var switched bool
	for _, k := range got.kinds {
		switched = switched || k == decide.KindLevelSwitched
	}
	if !switched {
		t.Errorf("the commit's events %v lack the failed round's level_switched", got.kinds)
	}
	if got.viewLevel != 2 || got.published != got.c.Publication || got.c.Publication == 0 {
		t.Errorf("when told, the views showed level %d and the hub version %d (commit says %d): want level 2 and the commit's version", got.viewLevel, got.published, got.c.Publication)
	}
	for i, s := range log {
		if s.stored < countUpTo(log, i) {
			t.Errorf("commit %d: the store held %d events when the observer was told, fewer than the %d journaled so far", i, s.stored, countUpTo(log, i))
		}
	}

	if _, err := e.Enable(ctx, "www", "a1", "test"); err != nil {
		t.Fatalf("enable: %v", err)
	}
	if last := log[len(log)-1].c; last.Round != 0 || last.Probed != 0 {
		t.Errorf("an action's own commit names round %d (%d sites), want none", last.Round, last.Probed)
	}
}

// countUpTo is the number of events the commits up to log[i] journaled.
func countUpTo(log []seen, i int) int {
	n := 0
	for _, s := range log[:i+1] {
		n += len(s.kinds)
	}
	return n
}

// The history feed is an observer.
var _ engine.Observer = (*engine.HistoryFeed)(nil)
