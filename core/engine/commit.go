package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// pubState is the publication as last committed: one entry per site (by
// fleet index) and a digest of the content, kept up to date site by site.
type pubState struct {
	entries []publication.Site
	sums    [][16]byte
	digest  [16]byte
	// started is set once this process has published (or decided what
	// version its content carries).
	started bool
}

// digestPrefix marks the digest format in the stored meta.
const digestPrefix = "x1:"

// pubEntry is site s as published: its current level and that level's
// enabled origins.
func pubEntry(s *fleet.Site) publication.Site {
	ps := publication.Site{Name: s.Spec.Name, Hostname: s.Config.Hostname, Level: s.State.Level}
	n := 0
	for i, o := range s.Spec.Origins {
		if o.Level == s.State.Level && s.State.Origins[i].State != decide.Disabled {
			n++
		}
	}
	ps.Origins = make([]publication.Origin, 0, n)
	for i, o := range s.Spec.Origins {
		st := s.State.Origins[i].State
		if o.Level != s.State.Level || st == decide.Disabled {
			continue
		}
		ps.Origins = append(ps.Origins, publication.Origin{Name: o.Name, Address: s.Config.Origins[i].Address, State: st.String()})
	}
	return ps
}

func sameEntry(a, b *publication.Site) bool {
	if a.Name != b.Name || a.Hostname != b.Hostname || a.Level != b.Level || len(a.Origins) != len(b.Origins) {
		return false
	}
	for i := range a.Origins {
		if a.Origins[i] != b.Origins[i] {
			return false
		}
	}
	return true
}

// entrySum fingerprints one entry; the digest is the XOR of them all, so
// that one site's change costs one hash.
func entrySum(p *publication.Site) [16]byte {
	h := sha256.New()
	var n [8]byte
	field := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(p.Name)
	field(p.Hostname)
	binary.BigEndian.PutUint64(n[:], uint64(p.Level))
	h.Write(n[:])
	for _, o := range p.Origins {
		field(o.Name)
		field(o.Address)
		field(o.State)
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

func xor(a *[16]byte, b [16]byte) {
	for i := range a {
		a[i] ^= b[i]
	}
}

// pubChange is a publication prepared for a commit: the new entries of the
// changed sites, the digest and version they make.
type pubChange struct {
	idx     []int
	entries []publication.Site
	sums    [][16]byte
	digest  [16]byte
	version uint64
	publish bool // a new snapshot goes to the hub after the commit
}

// preparePublication works out what the publication becomes with the
// changed sites, without touching the committed one. Called with e.mu held.
func (e *Engine) preparePublication() pubChange {
	n := len(e.fleet.Sites)
	pc := pubChange{digest: e.pub.digest, version: e.meta.Publication}
	differs := false
	if e.allChanged || e.pubBehind || len(e.pub.entries) != n {
		var d [16]byte
		pc.idx = make([]int, n)
		pc.entries = make([]publication.Site, n)
		pc.sums = make([][16]byte, n)
		for i, s := range e.fleet.Sites {
			pc.idx[i] = i
			pc.entries[i] = pubEntry(s)
			pc.sums[i] = entrySum(&pc.entries[i])
			xor(&d, pc.sums[i])
		}
		pc.digest = d
		differs = d != e.pub.digest || len(e.pub.entries) != n
	} else {
		for _, i := range e.changed.list {
			ent := pubEntry(e.fleet.Sites[i])
			if sameEntry(&ent, &e.pub.entries[i]) {
				continue
			}
			sum := entrySum(&ent)
			xor(&pc.digest, e.pub.sums[i])
			xor(&pc.digest, sum)
			pc.idx = append(pc.idx, i)
			pc.entries = append(pc.entries, ent)
			pc.sums = append(pc.sums, sum)
			differs = true
		}
	}
	digest := digestPrefix + hex.EncodeToString(pc.digest[:])
	switch {
	case !e.pub.started:
		// The first publication of this process: content the store
		// already knows under its version keeps that version, so that
		// nodes holding it are not woken for nothing; any other content
		// gets a new one.
		if e.meta.Publication == 0 || digest != e.meta.PublicationDigest {
			pc.version++
		}
		pc.publish = true
	case differs:
		pc.version++
		pc.publish = true
	}
	return pc
}

// flushLocked commits what is pending (records, events, probe marks,
// counters, the publication's version and digest) and then lets it out:
// the publication, the views, the journal's waiters and the notifiers.
// When the commit fails, nothing leaves and everything stays pending. It
// reports whether the state is saved. Called with e.mu held.
func (e *Engine) flushLocked(ctx context.Context) bool {
	if !e.active() {
		// The role was lost: nothing is written, and so nothing leaves,
		// not even to the views. What is pending stays pending; the
		// refresh from the store that follows a lost role replaces it.
		return false
	}
	pc := e.preparePublication()
	meta := e.meta
	meta.Publication = pc.version
	meta.PublicationDigest = digestPrefix + hex.EncodeToString(pc.digest[:])
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
	wrote := len(e.pending) > 0
	if cap(e.pending) > 4096 {
		e.pending = nil // a burst's buffer is not worth keeping
	} else {
		e.pending = e.pending[:0]
	}
	e.dirty.clear()
	e.marks.clear()
	e.deleted = e.deleted[:0]
	e.afterCommit(pc)
	if wrote {
		e.journalMu.Lock()
		close(e.journalChanged)
		e.journalChanged = make(chan struct{})
		e.journalMu.Unlock()
		if e.opts.OnCommit != nil {
			e.opts.OnCommit()
		}
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
	digest := digestPrefix + hex.EncodeToString(pc.digest[:])
	same := e.meta.PublicationDigest == "" || e.meta.PublicationDigest == digest
	pc.version = e.meta.Publication
	pc.publish = same && (pc.publish || e.hub.Current().Version != e.meta.Publication)
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
func (e *Engine) afterCommit(pc pubChange) {
	n := len(e.fleet.Sites)
	if len(e.pub.sums) != n || e.allChanged {
		e.pub.sums = make([][16]byte, n)
	}
	if len(pc.idx) > 0 {
		// The entries are shared with the published snapshot, which readers
		// hold: a change makes a new slice rather than writing into it.
		entries := make([]publication.Site, n)
		if len(e.pub.entries) == n && !e.allChanged {
			copy(entries, e.pub.entries)
		}
		for k, i := range pc.idx {
			entries[i], e.pub.sums[i] = pc.entries[k], pc.sums[k]
		}
		e.pub.entries = entries
	}
	e.pub.digest = pc.digest
	e.pub.started = true
	e.pubBehind = false // pc was worked out whole while it was set
	e.meta.Publication = pc.version
	if pc.publish {
		e.hub.Publish(&publication.Snapshot{Version: pc.version, Sites: e.pub.entries})
		e.metrics.publication.Set(float64(pc.version))
	}
	e.refreshViews()
}

// refreshViews swaps in new views: the changed sites get new snapshots,
// the others keep theirs. Called with e.mu held.
func (e *Engine) refreshViews() {
	old := e.views.Load()
	next := &Views{Round: e.fleet.Seq, Publication: e.meta.Publication, fleet: e.fleet}
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

// storeHint is the hint of an action refused because the store failed.
func storeHint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "no space left"):
		return "the data_dir is full: free space there; nothing was changed, so send the action again afterwards"
	case strings.Contains(msg, "fence"):
		return "this instance lost its role while acting; GET /v1/cluster names the instance to send it to"
	}
	return "the state store could not save the change, so nothing was changed; vigil_store_errors_total and the agent's log say why; send the action again once the store answers"
}
