package engine

import (
	"context"
	"slices"
	"sync"

	"github.com/vigilcdn/vigil/core/store"
)

// Loads that do not wait for a committing round.
//
// A round holds e.mu through its commit, which on etcd at scale can take
// minutes. A sharded instance that claims a dead member's sites must not
// wait for it: the sites would stay unprobed, and unowned, meanwhile. So
// the records it read after the claim (Claim), and those another shard's
// commit wrote (Follow), go into a queue under a lock of their own. They
// are taken into the fleet at once when e.mu is free, and otherwise by
// whoever holds it, before it lets it go: right after the commit in
// progress ends, before a round plans or an action acts, and before any
// reload that waits for e.mu (RefreshLoaded). So nothing reads a site in
// between: no round plans, and no action changes, a claimed site from the
// state this instance held before the claim, and the queue keeps the
// order of the loads, so an older read never lands over a newer one.
//
// What stays synchronous: RefreshLoaded waits for e.mu. The handover's
// barrier (a shard that releases sites reloads them, and the reload waits
// for a committing round, so no round of its own writes them after the
// release) depends on that, and is not changed.
//
// Claimed sites are probed early: once taken in, a claimed site that
// this instance has not probed yet is "fresh", and Run runs a takeover
// round (RunTakeover) of the fresh sites it owns at once, rather than
// leaving them for the next round, up to round_interval later. A takeover
// round probes only fresh sites, at most sites_per_round of them, longest
// ago first (the scheduler's order); it never starts less than
// confirmMargin before the next round is due and is cut short when that
// round is due, as a confirmation round is. So the regular rounds keep
// their times and their sites: each claimed site gets one early probe,
// and then the regular schedule.

// loadQueue holds the loads waiting for e.mu, and the claimed sites
// awaiting their first probe.
type loadQueue struct {
	mu   sync.Mutex
	list []queuedLoad // under mu
	// kick wakes Run: loads wait for e.mu, or fresh sites for a takeover
	// round.
	kick chan struct{}
	// fresh names the claimed sites taken in that no round of this
	// instance has probed since. Under e.mu.
	fresh map[string]struct{}
}

// queuedLoad is one read of the store waiting to be taken in.
type queuedLoad struct {
	st   *store.State
	pick func(site string) bool // asked when taken in
	// claim names the sites of a Claim (nil for Follow).
	claim []string
}

// Claim takes in the stored records of sites this instance has just
// claimed (sharded mode): st holds their records as read after the claim
// (a site without one starts as a new site). It never waits for the
// engine's lock: when a round holds it, committing, the records are
// queued and taken in as soon as that commit ends, before any round plans
// or any action acts. owned, when not nil, is called once they are
// queued: from then on the caller's Options.Owns may accept the sites,
// since a round that plans them, or an action on them, finds them as
// stored. Run then probes them in a takeover round at once, unless the
// next round is about to (see RunTakeover).
func (e *Engine) Claim(ctx context.Context, st *store.State, sites []string, owned func()) {
	set := make(map[string]bool, len(sites))
	for _, s := range sites {
		set[s] = true
	}
	e.enqueue(queuedLoad{st: st, pick: func(site string) bool { return set[site] }, claim: slices.Clone(sites)})
	if owned != nil {
		owned()
	}
	e.tryTakeLoads(ctx)
}

// Follow takes in the sites of st that pick accepts (asked when they are
// taken in), as RefreshLoaded does, but never waits for the engine's
// lock: when it is held, they are queued behind the loads before them and
// taken in when it is let go. A shard follows the others' commits with
// it; TakeLoads waits until they are in.
func (e *Engine) Follow(ctx context.Context, st *store.State, pick func(site string) bool) {
	e.enqueue(queuedLoad{st: st, pick: pick})
	e.tryTakeLoads(ctx)
}

// TakeLoads takes in the queued loads, waiting for the engine's lock.
func (e *Engine) TakeLoads(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.takeLoadsLocked(ctx)
}

func (e *Engine) enqueue(l queuedLoad) {
	e.loads.mu.Lock()
	e.loads.list = append(e.loads.list, l)
	e.loads.mu.Unlock()
}

// tryTakeLoads takes the queued loads in now if the engine's lock is
// free; otherwise its holder does before letting it go, or Run does when
// it wakes.
func (e *Engine) tryTakeLoads(ctx context.Context) {
	if e.mu.TryLock() {
		e.takeLoadsLocked(ctx)
		e.mu.Unlock()
		return
	}
	e.kickLoads()
}

func (e *Engine) kickLoads() {
	select {
	case e.loads.kick <- struct{}{}:
	default:
	}
}

// takeLoadsLocked takes in every queued load, in order, and lets out
// what changed once (settlePartial). Called with e.mu held.
func (e *Engine) takeLoadsLocked(ctx context.Context) {
	e.loads.mu.Lock()
	list := e.loads.list
	e.loads.list = nil
	e.loads.mu.Unlock()
	if len(list) == 0 {
		return
	}
	changed, claimed := false, false
	for _, l := range list {
		if e.reloadLocked(l.st, l.pick) {
			changed = true
		}
		for _, s := range l.claim {
			if e.fleet.SiteIndex(s) >= 0 {
				if e.loads.fresh == nil {
					e.loads.fresh = map[string]struct{}{}
				}
				e.loads.fresh[s] = struct{}{}
				claimed = true
			}
		}
	}
	if changed {
		e.settlePartial(ctx)
	}
	if claimed {
		e.kickLoads() // Run: a takeover round
	}
}

// probedFresh forgets the fresh sites a round probed, and says how many
// it forgot. Called with e.mu held.
func (e *Engine) probedFresh(probed func(yield func(name string) bool)) int {
	if len(e.loads.fresh) == 0 {
		return 0
	}
	n := len(e.loads.fresh)
	for name := range probed {
		delete(e.loads.fresh, name)
	}
	return n - len(e.loads.fresh)
}

// freshSites returns the fleet indices of the fresh sites, and forgets
// those the fleet no longer has. With prune (after a regular round) it
// also forgets those this instance does not own: they were released
// before their first probe. Called with e.mu held.
func (e *Engine) freshSites(prune bool) []int {
	var out []int
	for name := range e.loads.fresh {
		i := e.fleet.SiteIndex(name)
		if i < 0 || (prune && e.opts.Owns != nil && !e.opts.Owns(name)) {
			delete(e.loads.fresh, name)
			continue
		}
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}
