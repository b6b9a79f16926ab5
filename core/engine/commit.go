package engine

import (
	"context"
	"errors"
	"syscall"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/core/store/etcdstore"
)

// preparePublication works out what the publication becomes with the
// changed sites, without touching the committed one. Called with e.mu held.
func (e *Engine) preparePublication() publish.Change {
	return e.pub.Prepare(e.fleet.Sites, e.changed.list, e.allChanged || e.pubBehind, e.meta.Publication, e.meta.PublicationDigest)
}

// flushLocked commits what is pending (records, events, probe marks,
// counters, the publication's version and digest) and then lets it out:
// the publication, the views, the journal's waiters and the observers.
// When the commit fails, nothing leaves and everything stays pending. It
// reports whether the state is saved. Called with e.mu held.
func (e *Engine) flushLocked(ctx context.Context) bool {
	if !e.active() {
		// The role was lost: nothing is written, and so nothing leaves,
		// not even to the views. What is pending stays pending; the
		// refresh from the store that follows a lost role replaces it.
		return false
	}
	e.journalFailoverReports() // failover_times.go
	pc := e.preparePublication()
	meta := e.meta
	meta.Publication = pc.Version
	meta.PublicationDigest = pc.Digest()
	b := store.Batch{Meta: meta, Events: e.pending, Deleted: e.deleted}
	for _, i := range e.dirty.list {
		b.Sites = append(b.Sites, record(e.fleet.Sites[i], &e.info[i]))
	}
	for _, i := range e.marks.list {
		s := e.fleet.Sites[i]
		b.Probed = append(b.Probed, store.Probe{Site: s.Spec.Name, Round: s.LastProbed, At: timeOf(e.info[i].probedAt)})
	}
	if h := e.opts.Hooks; h != nil && h.BeforeCommit != nil {
		h.BeforeCommit()
	}
	if err := e.store.Commit(ctx, b); err != nil {
		e.lastCommitErr = err
		e.metrics.storeErrors.Inc()
		e.metrics.storeHealthy.Set(0)
		e.log.Error("cannot save the state; nothing of it is published, and it is retried with the next commit", "error", err)
		if e.opts.OnCommitError != nil {
			e.opts.OnCommitError(err)
		}
		return false
	}
	e.metrics.storeHealthy.Set(1)
	e.failoversCommitted()
	if h := e.opts.Hooks; h != nil && h.AfterCommit != nil {
		h.AfterCommit()
	}
	e.meta = meta
	for _, ev := range e.pending {
		e.metrics.events.WithLabelValues(ev.Event.Kind.String()).Inc()
		if ev.Event.Kind == decide.KindLevelSwitched {
			e.metrics.switches.WithLabelValues(ev.Event.Reason.String()).Inc()
		}
	}
	committed := e.pending
	e.dirty.clear()
	e.marks.clear()
	e.deleted = e.deleted[:0]
	publishing := e.opts.Now()
	e.afterCommit(pc)
	e.failoversPublished(publishing)
	if len(committed) > 0 {
		e.journalMu.Lock()
		close(e.journalChanged)
		e.journalChanged = make(chan struct{})
		e.journalMu.Unlock()
	}
	e.tellObservers(committed)
	if cap(e.pending) > 4096 {
		e.pending = nil // a burst's buffer is not worth keeping
	} else {
		e.pending = e.pending[:0]
	}
	return true
}

// settleLocked ends a change of the engine's sites: the instance in charge
// commits it (flushLocked); a standby, which writes nothing, drops what it
// would have written and shows the stored state (mirrorLocked). It reports
// whether the state is saved. Called with e.mu held.
func (e *Engine) settleLocked(ctx context.Context) bool {
	if e.active() {
		return e.flushLocked(ctx)
	}
	e.pending = e.pending[:0]
	e.dirty.clear()
	e.marks.clear()
	e.deleted = e.deleted[:0]
	e.mirrorLocked()
	return false
}

// mirrorLocked shows what a standby holds, which it loaded from the store:
// the views, and the publication under the stored version. It publishes
// only content the store's digest names: an instance whose configuration
// differs from the one that wrote the state would otherwise publish other
// content under the same version. Called with e.mu held.
func (e *Engine) mirrorLocked() {
	pc := e.preparePublication()
	same := e.meta.PublicationDigest == "" || e.meta.PublicationDigest == pc.Digest()
	pc.Version = e.meta.Publication
	pc.Publish = same && (pc.Publish || e.hub.Current().Version != e.meta.Publication)
	switch {
	case !same && !e.mirrorDiffers:
		e.log.Warn("this standby's publication differs from the stored one, so it publishes nothing until they agree: its configuration is probably not the active instance's; give every instance the same sites",
			"version", e.meta.Publication)
		e.mirrorDiffers = true
	case same:
		e.mirrorDiffers = false
	}
	e.afterCommit(pc)
}

// afterCommit takes the prepared publication in, publishes it when it is
// new, and rebuilds the views of the changed sites. Called with e.mu held.
func (e *Engine) afterCommit(pc publish.Change) {
	snap := e.pub.Apply(pc, len(e.fleet.Sites), e.allChanged)
	e.pubBehind = false // pc was worked out whole while it was set
	e.meta.Publication = pc.Version
	if snap != nil {
		e.hub.Publish(snap)
		e.metrics.publication.Set(float64(pc.Version))
	}
	e.refreshViews()
}

// refreshViews swaps in new views: the changed sites get new snapshots,
// the others keep theirs. Called with e.mu held.
func (e *Engine) refreshViews() {
	old := e.views.Load()
	next := &Views{Round: e.fleet.Seq, Publication: e.meta.Publication, fleet: e.fleet, probeSeries: e.cfg.Control.ProbeSeries(),
		auto: e.cfg.Control.SitesPerRoundAuto, roundSize: e.roundSize}
	switch {
	case old == nil || old.fleet != e.fleet || e.allChanged:
		next.sites = make([]*siteSnap, len(e.fleet.Sites))
		for i, s := range e.fleet.Sites {
			next.sites[i] = snapOf(s, &e.info[i])
		}
	case len(e.changed.list) > 0:
		next.sites = append([]*siteSnap(nil), old.sites...)
		for _, i := range e.changed.list {
			next.sites[i] = snapOf(e.fleet.Sites[i], &e.info[i])
		}
	default:
		next.sites = old.sites
	}
	if old == nil || e.lastChanged || old.fleet != e.fleet {
		next.last = append([]lastRef(nil), e.last...)
	} else {
		next.last = old.last
	}
	e.views.Store(next)
	e.changed.clear()
	e.allChanged, e.lastChanged = false, false
}

// storeHint is the hint of an action refused because the store failed,
// told by the error's kind (the file system's "no space left", the etcd
// store's fence), never by its words.
func storeHint(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return "the data_dir is full: free space there; nothing was changed, so send the action again afterwards"
	case errors.Is(err, etcdstore.ErrFenced):
		return "this instance lost its role while acting; GET /v1/cluster names the instance to send it to"
	}
	return "the state store could not save the change, so nothing was changed; vigil_store_errors_total and the agent's log say why; send the action again once the store answers"
}
