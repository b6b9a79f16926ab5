package etcdstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/core/store"
)

// write is one key a commit sets (or deletes) once it is saved.
type write struct {
	key  string
	val  string
	del  bool
	cmps []clientv3.Cmp // the fence's comparisons for it (sharded: its site's owner)
	// staged is its key in the commit's staged set (split commits).
	staged string
	// event is the event's index in the batch (>= 0), or -1.
	event int
	// probe is set on a probe mark's write (key under P/probed/), name on
	// a site's or a probe mark's.
	probe bool
	name  string
}

// prepared is a batch turned into writes, the fence consulted.
type prepared struct {
	writer []clientv3.Cmp
	writes []write // sites, deletions (site and probe mark), probe marks
	events []store.Event
}

// prepare turns b into writes. Sites the fence says this instance does
// not own are skipped.
func (s *Store) prepare(b store.Batch, fence Fence) (*prepared, error) {
	p := &prepared{events: b.Events}
	if fence != nil {
		var ok bool
		if p.writer, ok = fence.Writer(); !ok {
			return nil, fmt.Errorf("store: round %d not saved: %w (this instance is not the leader)", b.Meta.Round, ErrFenced)
		}
	}
	siteCmps := func(name string) ([]clientv3.Cmp, bool) {
		if fence == nil {
			return nil, true
		}
		return fence.Site(name)
	}
	for _, site := range b.Sites {
		cmps, ok := siteCmps(site.Name)
		if !ok {
			continue
		}
		v, err := json.Marshal(site)
		if err != nil {
			return nil, fmt.Errorf("store: site %s: %w", site.Name, err)
		}
		p.writes = append(p.writes, write{key: s.SitesPrefix() + site.Name, val: string(v), cmps: cmps, event: -1, name: site.Name})
	}
	for _, pr := range b.Probed {
		cmps, ok := siteCmps(pr.Site)
		if !ok {
			continue
		}
		p.writes = append(p.writes, write{key: s.ProbedPrefix() + pr.Site, val: formatProbe(pr), cmps: cmps, event: -1, probe: true, name: pr.Site})
	}
	for _, name := range b.Deleted {
		cmps, ok := siteCmps(name)
		if !ok {
			continue
		}
		// The probe mark goes with the record; one guard covers both.
		p.writes = append(p.writes, write{key: s.SitesPrefix() + name, del: true, cmps: cmps, event: -1, name: name},
			write{key: s.ProbedPrefix() + name, del: true, event: -1, probe: true, name: name})
	}
	return p, nil
}

// ops and cmps count what the batch needs as one transaction: the
// counters, every write and event, and the journal's pruning; the fence's
// comparisons and the counters' compare-and-swap.
func (p *prepared) ops() int { return 2 + len(p.writes) + len(p.events) }

// maxTxnBytes bounds what one transaction carries (keys and values), well
// under etcd's default --max-request-bytes of 1.5 MiB.
const maxTxnBytes = 1 << 20

// bytes is about what the batch carries as one transaction (events
// counted at their JSON size, with room for the rest).
func (p *prepared) bytes() int {
	n := 512
	for _, w := range p.writes {
		n += len(w.key) + len(w.val)
	}
	for _, e := range p.events {
		n += 128 + len(e.Site) + len(e.Actor) + len(e.Event.Origin) + len(e.Event.Group)
	}
	return n
}

func (p *prepared) cmps() int {
	n := len(p.writer) + 1
	for _, w := range p.writes {
		n += len(w.cmps)
	}
	return n
}

// mergeMeta is what P/meta becomes when a batch of n events lands on the
// stored counters: other writers (sharded) may have moved them.
func mergeMeta(stored, b store.Meta, n int) store.Meta {
	meta := store.Meta{Round: max(stored.Round, b.Round), LastEvent: stored.LastEvent + uint64(n),
		Publication: max(stored.Publication, b.Publication), PublicationDigest: stored.PublicationDigest,
		ProbedAll: stored.ProbedAll, ProbedAllAt: stored.ProbedAllAt}
	if b.Publication >= stored.Publication {
		meta.PublicationDigest = b.PublicationDigest
	}
	if b.ProbedAll > stored.ProbedAll {
		meta.ProbedAll, meta.ProbedAllAt = b.ProbedAll, b.ProbedAllAt
	}
	return meta
}

// cutoff is the last sequence number the journal no longer keeps when
// its last event is last.
func (s *Store) cutoff(last uint64) uint64 {
	if last > s.journalSize {
		return last - s.journalSize
	}
	return 0
}

// Commit writes a batch, all of it or, as readers see it, none of it.
// Sites the fence says this instance does not own are skipped.
//
// A batch that fits in one transaction (etcd's --max-txn-ops, both in
// operations and in comparisons) is one transaction. A larger one is
// split (see doc.go, "Split commits"): its writes are staged in chunks
// under P/staged/ID, then one small transaction, the commit marker,
// moves the counters and names the staged set under P/applying/ID; from
// that moment readers see the whole batch, and before it none of it. The
// staged writes are then copied to their keys in chunks and the set is
// removed. A commit that fails before its marker wrote nothing any
// reader sees, so the engine keeps the round pending and retries it.
func (s *Store) Commit(ctx context.Context, b store.Batch) error {
	if err := s.check(); err != nil {
		return err
	}
	s.mu.Lock()
	fence := s.fence
	s.mu.Unlock()
	p, err := s.prepare(b, fence)
	if err != nil {
		return err
	}
	if s.rollForwardDue() {
		// A split commit of an earlier term (or ours, cut short) is
		// finished first: a deletion must not land under a staged record
		// that readers would still prefer to the missing key.
		err := s.rollForward(ctx)
		var h hookError
		if errors.As(err, &h) {
			return h.error
		}
		if err != nil && len(b.Deleted) > 0 {
			return fmt.Errorf("store: round %d not saved: finishing an earlier split commit first: %w", b.Meta.Round, err)
		}
	}
	err = s.commit(ctx, b, p)
	if isTooManyOps(err) {
		// etcd allows fewer operations than max_txn_ops says: find out
		// how many, and split by that.
		if _, _, perr := s.ProbeLimit(ctx); perr == nil {
			err = s.commit(ctx, b, p)
		}
	}
	return err
}

func (s *Store) commit(ctx context.Context, b store.Batch, p *prepared) error {
	limit := s.limit()
	fits := func(p *prepared) bool { return p.ops() <= limit && p.cmps() <= limit && p.bytes() <= maxTxnBytes }
	if fits(p) {
		return s.commitOne(ctx, b, p)
	}
	// Too large for one transaction. The probe marks go first, straight to
	// their keys: they are the scheduler's memory only (which round last
	// probed a site), no reader takes them for a committed change, and a
	// round that probes part of a large fleet writes one per probed site
	// (500 by default) even when nothing changed.
	rest := &prepared{writer: p.writer, events: p.events}
	var marks []write
	for _, w := range p.writes {
		if w.probe && !w.del {
			marks = append(marks, w)
		} else {
			rest.writes = append(rest.writes, w)
		}
	}
	if err := s.writeMarks(ctx, b.Meta.Round, p.writer, marks, limit); err != nil {
		return err
	}
	if fits(rest) {
		return s.commitOne(ctx, b, rest)
	}
	return s.commitSplit(ctx, b, rest)
}

// writeMarks writes probe marks to their keys in transactions of at most
// limit operations, each guarded by the fence.
func (s *Store) writeMarks(ctx context.Context, round uint64, writer []clientv3.Cmp, marks []write, limit int) error {
	for len(marks) > 0 {
		cmps := append([]clientv3.Cmp{}, writer...)
		var ops []clientv3.Op
		n := 0
		for n < len(marks) && len(ops)+1 <= limit && len(cmps)+len(marks[n].cmps) <= limit {
			cmps = append(cmps, marks[n].cmps...)
			ops = append(ops, clientv3.OpPut(marks[n].key, marks[n].val))
			n++
		}
		if n == 0 {
			return fmt.Errorf("store: round %d not saved: one probe mark needs more comparisons than max_txn_ops %d allows", round, limit)
		}
		resp, err := s.txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("store: saving the probe marks of round %d to etcd: %w", round, err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("store: round %d not saved: %w", round, ErrFenced)
		}
		marks = marks[n:]
	}
	return nil
}

// commitOne writes the batch in one transaction, under a compare-and-swap
// of the counters (which allocates the events' sequence numbers).
func (s *Store) commitOne(ctx context.Context, b store.Batch, p *prepared) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	guard := append([]clientv3.Cmp{}, p.writer...)
	for _, w := range p.writes {
		guard = append(guard, w.cmps...)
	}
	for attempt := 0; ; attempt++ {
		stored, rev, err := s.readMeta(ctx)
		if err != nil {
			return err
		}
		meta := mergeMeta(stored, b.Meta, len(p.events))
		metaVal, _ := json.Marshal(meta)
		ops := []clientv3.Op{clientv3.OpPut(s.MetaKey(), string(metaVal))}
		for _, w := range p.writes {
			if w.del {
				ops = append(ops, clientv3.OpDelete(w.key))
			} else {
				ops = append(ops, clientv3.OpPut(w.key, w.val))
			}
		}
		// Keep the newest journalSize events: older ones are deleted, and
		// new ones already too old are not written (etcd refuses a put and
		// a delete of one key in one transaction).
		cutoff := s.cutoff(meta.LastEvent)
		for i, e := range p.events {
			e.Seq = stored.LastEvent + uint64(i) + 1
			if e.Seq <= cutoff {
				continue
			}
			v, err := json.Marshal(e)
			if err != nil {
				return fmt.Errorf("store: event of site %s: %w", e.Site, err)
			}
			ops = append(ops, clientv3.OpPut(s.eventKey(e.Seq), string(v)))
		}
		if cutoff > 0 {
			ops = append(ops, clientv3.OpDelete(s.eventKey(0), clientv3.WithRange(s.eventKey(min(cutoff, stored.LastEvent)+1))))
		}
		cmps := append(append([]clientv3.Cmp{}, guard...), clientv3.Compare(clientv3.ModRevision(s.MetaKey()), "=", rev))
		resp, err := s.txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("store: saving round %d to etcd: %w", b.Meta.Round, err)
		}
		if resp.Succeeded {
			s.mu.Lock()
			s.metaRev = resp.Header.Revision
			s.mu.Unlock()
			return nil
		}
		if err := s.fenced(ctx, b.Meta.Round, guard); err != nil {
			return err
		}
		if attempt >= 50 {
			return fmt.Errorf("store: round %d not saved: the counters at %s kept changing under 50 attempts", b.Meta.Round, s.MetaKey())
		}
	}
}

// fenced tells a failed guarded transaction apart: the fence (ErrFenced)
// or the counters moved by another writer (nil: try again).
func (s *Store) fenced(ctx context.Context, round uint64, guard []clientv3.Cmp) error {
	if len(guard) == 0 {
		return nil
	}
	g, err := s.txn(ctx).If(guard...).Commit()
	if err != nil {
		return fmt.Errorf("store: saving round %d to etcd: %w", round, err)
	}
	if !g.Succeeded {
		return fmt.Errorf("store: round %d not saved: %w", round, ErrFenced)
	}
	return nil
}

// commitSplit writes a batch too large for one transaction: staged
// chunks, the marker, then the copy to the keys (doc.go). Each call to
// etcd has the store's timeout, not the whole commit: a large commit
// takes as many calls as it needs, and an unreachable etcd ends it after
// one timeout.
func (s *Store) commitSplit(ctx context.Context, b store.Batch, p *prepared) error {
	s.sweep(ctx)
	id := newSetID()
	head, dir := s.stagingKey(id), s.StagedPrefix()+id+"/"
	// Every write and event goes to the staged set: a site record, a
	// deletion (an empty value), a probe mark, an event by its index in
	// the batch (its sequence number is allocated by the marker).
	staged := make([]write, 0, len(p.writes)+len(p.events))
	for _, w := range p.writes {
		switch {
		case w.probe && w.del:
			continue // the site's tombstone deletes its probe mark too
		case w.probe:
			w.staged = dir + "probed/" + w.name
		default:
			w.staged = dir + "sites/" + w.name
		}
		staged = append(staged, w)
	}
	for i, e := range p.events {
		e.Seq = 0
		v, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("store: event of site %s: %w", e.Site, err)
		}
		staged = append(staged, write{staged: dir + "events/" + fmt.Sprintf("%010d", i), val: string(v), event: i})
	}
	limit := s.limit()
	var headRev int64
	chunks := 0
	for rest := staged; len(rest) > 0; {
		cmps := append([]clientv3.Cmp{}, p.writer...)
		var ops []clientv3.Op
		if headRev == 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(head), "=", 0))
			ops = append(ops, clientv3.OpPut(head, strconv.FormatInt(time.Now().UnixNano(), 10)))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(head), "=", headRev))
		}
		n, size := 0, 0
		for n < len(rest) && len(ops)+1 <= limit && len(cmps)+len(rest[n].cmps) <= limit &&
			(n == 0 || size+len(rest[n].staged)+len(rest[n].val) <= maxTxnBytes) {
			w := rest[n]
			val := w.val
			if w.del {
				val = "" // a tombstone
			}
			ops = append(ops, clientv3.OpPut(w.staged, val))
			cmps = append(cmps, w.cmps...)
			size += len(w.staged) + len(val)
			n++
		}
		if n == 0 {
			return fmt.Errorf("store: round %d not saved: one write needs more comparisons than max_txn_ops %d allows", b.Meta.Round, limit)
		}
		resp, err := s.txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			s.abandon(id)
			return fmt.Errorf("store: saving round %d to etcd (staging %d writes): %w", b.Meta.Round, len(staged), err)
		}
		if !resp.Succeeded {
			s.abandon(id)
			// Every comparison but the head's (at len(p.writer)): the fence.
			fence := append(append([]clientv3.Cmp{}, cmps[:len(p.writer)]...), cmps[len(p.writer)+1:]...)
			if err := s.fenced(ctx, b.Meta.Round, fence); err != nil {
				return err
			}
			return fmt.Errorf("store: round %d not saved: its staged writes under %s were removed meanwhile (an instance took them for abandoned); it is saved again with the next commit", b.Meta.Round, s.StagedPrefix()+id)
		}
		if headRev == 0 {
			headRev = resp.Header.Revision
		}
		rest = rest[n:]
		chunks++
		if err := s.hook(fmt.Sprintf("staged %d", chunks)); err != nil {
			return errors.Unwrap(err)
		}
	}
	// The marker: the counters, the set named as committed, the journal
	// pruned. Only this transaction competes with other writers for the
	// counters; the staged set does not depend on them.
	guard := append(append([]clientv3.Cmp{}, p.writer...), clientv3.Compare(clientv3.CreateRevision(head), "=", headRev))
	for attempt := 0; ; attempt++ {
		stored, rev, err := s.readMeta(ctx)
		if err != nil {
			return err
		}
		meta := mergeMeta(stored, b.Meta, len(p.events))
		metaVal, _ := json.Marshal(meta)
		ops := []clientv3.Op{clientv3.OpPut(s.MetaKey(), string(metaVal)),
			clientv3.OpPut(s.ApplyingPrefix()+id, formatSet(stored.LastEvent, len(p.events)))}
		if cutoff := s.cutoff(meta.LastEvent); cutoff > 0 {
			ops = append(ops, clientv3.OpDelete(s.eventKey(0), clientv3.WithRange(s.eventKey(min(cutoff, stored.LastEvent)+1))))
		}
		cmps := append(append([]clientv3.Cmp{}, guard...), clientv3.Compare(clientv3.ModRevision(s.MetaKey()), "=", rev))
		resp, err := s.txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			if markerRev, ok := s.landed(id); ok {
				// The answer was lost, not the marker.
				return s.finish(ctx, id, markerRev, stored.LastEvent, p, staged)
			}
			return fmt.Errorf("store: saving round %d to etcd (its commit marker): %w", b.Meta.Round, err)
		}
		if resp.Succeeded {
			s.mu.Lock()
			s.metaRev = resp.Header.Revision
			s.mu.Unlock()
			if err := s.hook("marker"); err != nil {
				return errors.Unwrap(err)
			}
			return s.finish(ctx, id, resp.Header.Revision, stored.LastEvent, p, staged)
		}
		if err := s.fenced(ctx, b.Meta.Round, guard); err != nil {
			s.abandon(id)
			return err
		}
		if attempt >= 50 {
			s.abandon(id)
			return fmt.Errorf("store: round %d not saved: the counters at %s kept changing under 50 attempts", b.Meta.Round, s.MetaKey())
		}
	}
}

// finish copies a committed split commit's writes to their keys and
// removes its set. It does not fail the commit, which is saved: what it
// does not finish, the next commit rolls forward from etcd. (Only the
// test hook's error is returned.)
func (s *Store) finish(ctx context.Context, id string, markerRev int64, base uint64, p *prepared, staged []write) error {
	ws := make([]write, 0, len(staged))
	for _, w := range staged {
		if w.event >= 0 {
			e := p.events[w.event]
			e.Seq = base + uint64(w.event) + 1
			v, err := json.Marshal(e)
			if err != nil {
				continue // marshalled once already
			}
			w.key, w.val = s.eventKey(e.Seq), string(v)
		}
		ws = append(ws, w)
	}
	err := s.applySet(ctx, id, markerRev, ws, false)
	if err != nil {
		s.mu.Lock()
		s.pendingSets = true
		s.mu.Unlock()
	}
	var h hookError
	if errors.As(err, &h) {
		return h.error
	}
	return nil
}

// abandon removes the staged set of a commit that did not land, as far
// as etcd answers soon; what it leaves, sweep removes later.
func (s *Store) abandon(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = s.txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(s.ApplyingPrefix()+id), "=", 0)).
		Then(clientv3.OpDelete(s.stagingKey(id)), clientv3.OpDelete(s.StagedPrefix()+id+"/", clientv3.WithPrefix())).Commit()
}

// landed reports whether the marker of set id is in etcd, and its
// revision: after an error the transaction may have landed all the same.
func (s *Store) landed(id string) (int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := s.get(ctx, s.ApplyingPrefix()+id)
	if err != nil || len(resp.Kvs) == 0 {
		return 0, false
	}
	return resp.Kvs[0].CreateRevision, true
}

// txn is a transaction whose Commit has the store's timeout.
func (s *Store) txn(ctx context.Context) clientv3.Txn {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	return timedTxn{s.cli.Txn(ctx), cancel}
}

type timedTxn struct {
	clientv3.Txn
	cancel context.CancelFunc
}

func (t timedTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t timedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Then(ops...)
	return t
}
func (t timedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}
func (t timedTxn) Commit() (*clientv3.TxnResponse, error) {
	defer t.cancel()
	return t.Txn.Commit()
}

// get is a Get with the store's timeout.
func (s *Store) get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.cli.Get(ctx, key, opts...)
}

// hook runs the test hook after a transaction of a split commit.
func (s *Store) hook(step string) error {
	if s.afterTxn == nil {
		return nil
	}
	if err := s.afterTxn(step); err != nil {
		return hookError{err}
	}
	return nil
}

// hookError is the test hook's error: Commit returns it as it is.
type hookError struct{ error }

func (e hookError) Unwrap() error { return e.error }

func newSetID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// formatSet and parseSet are a marker's value: the sequence number the
// set's events follow, and how many there are.
func formatSet(base uint64, events int) string {
	return strconv.FormatUint(base, 10) + " " + strconv.Itoa(events)
}

func parseSet(v string) (base uint64, events int, err error) {
	var b, n string
	if _, err := fmt.Sscan(v, &b, &n); err != nil {
		return 0, 0, fmt.Errorf("commit marker %q: %w", v, err)
	}
	if base, err = strconv.ParseUint(b, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("commit marker %q: %w", v, err)
	}
	if events, err = strconv.Atoi(n); err != nil {
		return 0, 0, fmt.Errorf("commit marker %q: %w", v, err)
	}
	return base, events, nil
}
