package engine

import (
	"context"
	"fmt"

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
// ownership moves to it before it probes it. A round in progress is
// discarded.
func (e *Engine) RefreshSites(ctx context.Context, pick func(site string) bool) error {
	st, err := e.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("refreshing from the store: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	old, oldInfo, oldLast := e.fleet, e.info, e.last
	recordOf := func(name string) (store.Site, bool) {
		if pick == nil || pick(name) {
			r, ok := st.Sites[name]
			return r, ok
		}
		i := old.SiteIndex(name)
		return record(old.Sites[i], &oldInfo[i]), true
	}
	carry := func(name string) lastRef {
		if pick == nil || pick(name) {
			return lastRef{} // the stored record is the truth: no votes of ours
		}
		return oldLast[old.SiteIndex(name)]
	}
	e.meta.Round = max(e.meta.Round, st.Meta.Round)
	e.meta.LastEvent = max(e.meta.LastEvent, st.Meta.LastEvent)
	e.meta.ProbedAll = max(e.meta.ProbedAll, st.Meta.ProbedAll)
	if pick == nil {
		// Mirror the stored publication exactly: same version, same
		// content as the instance that wrote it.
		e.meta = st.Meta
		e.pub.started = false
	} else {
		e.meta.Publication = max(e.meta.Publication, st.Meta.Publication)
	}
	if pick != nil {
		// A partial refresh writes nothing of the reloaded sites: they are
		// as stored. What this instance still owes the store (a failed
		// commit's sites and events) stays owed.
		pending := append([]store.Event(nil), e.pending...)
		lastEvent := e.meta.LastEvent
		var owed []string
		for _, i := range e.dirty.list {
			if name := old.Sites[i].Spec.Name; !pick(name) {
				owed = append(owed, name)
			}
		}
		e.install(e.cfg, recordOf, carry)
		e.dirty.clear()
		for _, name := range owed {
			if i := e.fleet.SiteIndex(name); i >= 0 {
				e.dirty.add(i)
			}
		}
		e.pending, e.meta.LastEvent = pending, lastEvent
		// The publication changes with the reloaded sites: its new version
		// is committed before it is published, like any other.
		e.flushLocked(ctx)
		return nil
	}
	e.pending = e.pending[:0]
	e.install(e.cfg, recordOf, carry)
	if !e.active() {
		// A standby keeps no pending writes: the active instance made
		// them already.
		e.pending = e.pending[:0]
		e.dirty.clear()
	}
	e.flushLocked(ctx)
	return nil
}
