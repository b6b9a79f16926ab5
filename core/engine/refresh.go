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
// ownership moves to it before it probes it.
func (e *Engine) RefreshSites(ctx context.Context, pick func(site string) bool) error {
	st, err := e.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("refreshing from the store: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	records := make(map[string]store.Site, len(e.fleet.Sites))
	extras := make(map[string]*siteExtra, len(e.extras))
	for _, s := range e.fleet.Sites {
		name := s.Spec.Name
		if pick == nil || pick(name) {
			if r, ok := st.Sites[name]; ok {
				records[name] = r
			}
			continue // fresh extras: the stored record is the truth
		}
		records[name] = record(s, e.extra(name))
		extras[name] = e.extra(name)
	}
	e.meta.Round = max(e.meta.Round, st.Meta.Round)
	e.meta.LastEvent = max(e.meta.LastEvent, st.Meta.LastEvent)
	if pick == nil {
		// Mirror the stored publication exactly: same version, same
		// content as the instance that wrote it.
		e.meta.Round, e.meta.LastEvent = st.Meta.Round, st.Meta.LastEvent
		e.meta.Publication = st.Meta.Publication
		e.lastPub = nil
	} else {
		e.meta.Publication = max(e.meta.Publication, st.Meta.Publication)
	}
	if pick != nil {
		// A partial refresh writes nothing: the reloaded sites are as
		// stored, and what this instance still owes the store (a failed
		// commit's sites and events) stays owed.
		pending := append([]store.Event(nil), e.pending...)
		lastEvent := e.meta.LastEvent
		dirty := make(map[string]bool, len(e.dirty))
		for k, v := range e.dirty {
			dirty[k] = v
		}
		e.install(e.cfg, records, extras)
		e.pending, e.dirty, e.meta.LastEvent = pending, dirty, lastEvent
		return nil
	}
	e.install(e.cfg, records, extras)
	if !e.active() {
		// A standby keeps no pending writes: the active instance made
		// them already.
		e.pending = e.pending[:0]
		clear(e.dirty)
		return nil
	}
	e.commitLocked(ctx)
	return nil
}
