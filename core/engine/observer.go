package engine

import "github.com/vigilcdn/vigil/core/store"

// Observer is what reads the engine's results: the notifiers, the
// history feed, a cluster's leader. Its Committed is called after each
// durable commit, once the commit is saved and its publication and views
// are out, in commit order (see the Engine's "Order of effects"): nothing
// an observer is told of can be lost to a crash.
//
// Committed is called with the engine's lock held: it must be quick (wake
// a goroutine, copy what it needs and hand it over) and must not call the
// engine's actions, rounds or Reload. Reading Views is fine: it takes no
// lock.
type Observer interface {
	Committed(Commit)
}

// ObserverFunc makes a function an Observer.
type ObserverFunc func(Commit)

// Committed calls f(c).
func (f ObserverFunc) Committed(c Commit) { f(c) }

// Commit is what a durable commit changed.
type Commit struct {
	// Round is the round (or confirmation round) whose decisions the
	// commit saved, 0 when it saved none (an action, a reload); Probed
	// is how many sites it probed, and Confirm is set for a confirmation
	// round. A round whose own commit failed is saved by the next commit
	// that succeeds, which then carries it.
	Round   uint64
	Probed  int
	Confirm bool
	// Events are the events the commit journaled, in order; they are
	// valid only during the call.
	Events []store.Event
	// Views are the views after the commit.
	Views *Views
	// Publication is the publication's version after the commit.
	Publication uint64
}

// Observe adds o to the observers: it is told of every commit from the
// next one on.
func (e *Engine) Observe(o Observer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.observers = append(e.observers, o)
}

// unsaved is a round applied and not yet committed: the next durable
// commit tells the observers of it.
type unsaved struct {
	seq     uint64
	probed  int
	confirm bool
}

// tellObservers calls every observer after a durable commit. Called with
// e.mu held.
func (e *Engine) tellObservers(events []store.Event) {
	c := Commit{Round: e.roundOwed.seq, Probed: e.roundOwed.probed, Confirm: e.roundOwed.confirm,
		Events: events, Views: e.views.Load(), Publication: e.meta.Publication}
	e.roundOwed = unsaved{}
	for _, o := range e.observers {
		o.Committed(c)
	}
}
