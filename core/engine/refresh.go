package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/store"
)

func (e *Engine) active() bool { return e.opts.Active == nil || e.opts.Active() }

// Refresh reloads every site and the counters from the store and rebuilds
// the views and the publication (whose version becomes the stored one). A
// standby calls it when the store changes; a new leader calls it before
// its first round, so it never acts on what it held in memory.
func (e *Engine) Refresh(ctx context.Context) error { return e.RefreshSites(ctx, nil) }

// RefreshSites reloads the sites pick accepts from the store (all when
// pick is nil) and keeps the others as they are in memory: a sharded
// instance refreshes the sites it does not own, and a site whose
// ownership moves to it before it probes it. A full refresh discards a
// round in progress. A partial one leaves it alone unless the round
// planned one of the picked sites (a site handed over meanwhile): sites
// whose stored state differs from memory are reloaded in place, and one
// that finds nothing new only reads.
func (e *Engine) RefreshSites(ctx context.Context, pick func(site string) bool) error {
	st, err := e.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("refreshing from the store: %w", err)
	}
	return e.RefreshLoaded(ctx, st, pick)
}

// RefreshLoaded is RefreshSites from a state the caller read: a shard
// passes the sites another shard's commit wrote (etcd store, LoadSince)
// and picks only those, so that a commit costs it what changed. With a
// state that holds only some sites, pick must accept only sites it holds.
// It waits for the engine's lock, so for a round that is committing:
// the handover's barrier relies on that. The loads queued before it
// (Claim, Follow) are taken in first, in their order.
func (e *Engine) RefreshLoaded(ctx context.Context, st *store.State, pick func(site string) bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.takeLoadsLocked(ctx)
	if pick != nil {
		if e.reloadLocked(st, pick) {
			e.settlePartial(ctx)
		}
		return nil
	}
	// Mirror the stored publication exactly: same version, same content
	// as the instance that wrote it.
	e.meta = st.Meta
	e.pub.Restart()
	e.pending = e.pending[:0]
	e.install(e.cfg, func(name string) (store.Site, bool) {
		r, ok := st.Sites[name]
		return r, ok
	}, func(string) lastRef { return lastRef{} })
	e.settleLocked(ctx)
	return nil
}

// reloadLocked takes the sites pick accepts from st into the engine (a
// partial refresh) and keeps the others as they are in memory. It
// reports whether something changed that must be let out
// (settlePartial). Called with e.mu held.
func (e *Engine) reloadLocked(st *store.State, pick func(site string) bool) bool {
	old, oldInfo, oldLast := e.fleet, e.info, e.last
	recordOf := func(name string) (store.Site, bool) {
		if pick(name) {
			r, ok := st.Sites[name]
			return r, ok
		}
		i := old.SiteIndex(name)
		return record(old.Sites[i], &oldInfo[i]), true
	}
	carry := func(name string) lastRef {
		if pick(name) {
			return lastRef{} // the stored record is the truth: no votes of ours
		}
		return oldLast[old.SiteIndex(name)]
	}
	e.meta.Round = max(e.meta.Round, st.Meta.Round)
	e.meta.LastEvent = max(e.meta.LastEvent, st.Meta.LastEvent)
	e.meta.ProbedAll = max(e.meta.ProbedAll, st.Meta.ProbedAll)
	e.meta.Publication = max(e.meta.Publication, st.Meta.Publication)
	// A partial refresh writes nothing of the reloaded sites: they are
	// as stored. What this instance still owes the store (a failed
	// commit's sites, marks and events) stays owed.
	differ, inPlace := e.storedDiffers(st, pick)
	if len(differ) == 0 && inPlace {
		return false // nothing to reload: a round in progress goes on
	}
	if inPlace {
		// None of them is in the round in progress: they are reloaded
		// where they are, and the round goes on. A site with no record
		// starts afresh, as a new site does.
		now := nanos(e.opts.Now())
		for _, i := range differ {
			if r, ok := st.Sites[e.fleet.Sites[i].Spec.Name]; ok {
				e.restoreInPlace(i, r, now)
			} else {
				e.resetInPlace(i, now)
			}
		}
		return true
	}
	pending := append([]store.Event(nil), e.pending...)
	lastEvent := e.meta.LastEvent
	owed := e.owed(func(name string) bool { return !pick(name) })
	e.install(e.cfg, recordOf, carry)
	e.dirty.clear()
	e.marks.clear()
	e.reowe(owed)
	e.pending, e.meta.LastEvent = pending, lastEvent
	return true
}

// settlePartial lets out a partial refresh. When the publication changes
// with the reloaded sites, its new version is committed before it is
// published, like any other. A commit only for that: one that wrote nothing
// new would wake the other instances' refreshes, and theirs this one's.
// Called with e.mu held.
func (e *Engine) settlePartial(ctx context.Context) {
	if !e.active() {
		// Nothing is committed now, so nothing is published: the views
		// show what was loaded, and the publication is worked out whole
		// at the next commit, which publishes what it left behind.
		e.pubBehind = true
		e.refreshViews()
		return
	}
	pc := e.preparePublication()
	if pc.Publish {
		e.flushLocked(ctx)
		return
	}
	e.afterCommit(pc)
}

// storedDiffers returns the sites pick accepts for which the store holds
// a state other than the one in memory (no record: the state of a new
// site): only those make a partial refresh more than a reading. The last
// round's votes and probe times are not state, and differ without
// counting. inPlace is set when none of the sites pick accepts is in the
// round in progress, so that the refresh can leave that round alone: a
// shard that claims sites, or follows another's commits, does not throw
// its round away. A round that planned a site pick accepts (one whose
// ownership moved away meanwhile) must be discarded, so that it never
// writes the site after its new owner took it. Called with e.mu held.
func (e *Engine) storedDiffers(st *store.State, pick func(site string) bool) (differ []int, inPlace bool) {
	inPlace = true
	for i, s := range e.fleet.Sites {
		if !pick(s.Spec.Name) {
			continue
		}
		if p := e.inFlight; p != nil {
			if _, planned := slices.BinarySearch(p.Picked, i); planned {
				inPlace = false
			}
		}
		r, ok := st.Sites[s.Spec.Name]
		if !ok {
			r = freshRecord(s)
		}
		if sameState(s, &e.info[i], &r) {
			continue
		}
		differ = append(differ, i)
	}
	return differ, inPlace
}

// freshRecord is the record of site s as a new site starts: at its top
// level, every origin unknown but those the configuration disables.
func freshRecord(s *fleet.Site) store.Site {
	enabled := configEnabled(s)
	fresh := &fleet.Site{Spec: s.Spec, Config: s.Config, State: decide.NewSiteState(s.Spec, enabled)}
	x := newSiteInfo(fresh)
	for j := range x.origins {
		if !enabled[j] {
			x.origins[j].disabledBy, x.origins[j].cause = disabledByConfig, "disabled in the configuration"
		}
	}
	return record(fresh, &x)
}

// configEnabled says, by origin, whether the configuration enables it.
func configEnabled(s *fleet.Site) []bool {
	enabled := make([]bool, len(s.Config.Origins))
	for j, o := range s.Config.Origins {
		enabled[j] = o.Enabled
	}
	return enabled
}

// resetInPlace makes site i a new site again, in the fleet as it is: the
// store holds no record of it (a site no instance has written yet, which
// this shard now owns or follows), as install does for such a site. It
// is not marked for writing: its owner writes it when it probes it.
// Called with e.mu held.
func (e *Engine) resetInPlace(i int, now int64) {
	s := e.fleet.Sites[i]
	enabled := configEnabled(s)
	*s.State = *decide.NewSiteState(s.Spec, enabled)
	s.LastProbed = 0
	e.info[i] = newSiteInfo(s)
	x := &e.info[i]
	for j := range x.origins {
		x.origins[j].since = now
		if !enabled[j] {
			x.origins[j].disabledBy, x.origins[j].cause = disabledByConfig, "disabled in the configuration"
		}
	}
	x.stateSum = stateSum(s, x)
	e.last[i] = lastRef{}
	e.lastChanged = true
	e.changed.add(i)
}

// restoreInPlace reloads site i from its stored record r, in the fleet as
// it is: a site another instance owns, which the round in progress does not
// probe. What this instance would write of it is what it just read, so it
// is not marked for writing. Called with e.mu held.
func (e *Engine) restoreInPlace(i int, r store.Site, now int64) {
	s := e.fleet.Sites[i]
	if e.meta.ProbedAll > r.LastProbed {
		r.LastProbed, r.LastProbedAt = e.meta.ProbedAll, e.meta.ProbedAllAt
	}
	enabled := make([]bool, len(s.Config.Origins))
	for j, o := range s.Config.Origins {
		enabled[j] = o.Enabled
	}
	*s.State = *decide.NewSiteState(s.Spec, enabled)
	e.info[i] = newSiteInfo(s)
	x := &e.info[i]
	restore(s, x, r, enabled, now) // its events are the owner's to journal
	x.stateSum = stateSum(s, x)
	e.last[i] = lastRef{}
	e.lastChanged = true
	e.changed.add(i)
}
