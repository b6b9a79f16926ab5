package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/core/store"
)

// ErrFenced is wrapped by the errors of writes refused because this
// instance no longer holds the lease that entitles it to write.
var ErrFenced = errors.New("refused by the fence: this instance no longer holds the etcd lease that entitles it to write")

// Fence says what this instance may write and the etcd comparisons that
// prove it still may. Its methods are called for every transaction, so a
// fence that follows an election answers with the current term.
type Fence interface {
	// Writer returns the comparisons every write needs (the leader key of
	// this term, or this instance's membership key). ok is false when this
	// instance may not write at all now.
	Writer() (cmps []clientv3.Cmp, ok bool)
	// Site returns the comparisons guarding the write of one site, and
	// false when this instance does not own the site (its write is
	// skipped: another instance keeps it).
	Site(name string) (cmps []clientv3.Cmp, ok bool)
	// Notifier returns the comparisons guarding delivery-cursor writes,
	// and false when this instance does not deliver notifications.
	Notifier() (cmps []clientv3.Cmp, ok bool)
}

// Options configure a Store.
type Options struct {
	// Prefix is the key prefix, such as "/vigil" (no trailing slash).
	Prefix string
	// JournalSize bounds the journal (store.DefaultJournalSize when <= 0).
	JournalSize int
	// MaxTxnOps is etcd's --max-txn-ops (128 when <= 0).
	MaxTxnOps int
	// Fence guards every write; nil writes unguarded (one instance alone).
	Fence Fence
	// Timeout bounds each call to etcd (5s when <= 0), so that a round
	// never waits on an unreachable etcd for longer.
	Timeout time.Duration
}

// Store is the etcd implementation of store.Store. It is safe for
// concurrent use.
type Store struct {
	cli         *clientv3.Client
	prefix      string
	journalSize uint64
	maxOps      int
	timeout     time.Duration

	mu      sync.Mutex
	fence   Fence
	metaRev int64 // mod revision of P/meta last seen
	closed  bool
}

var _ store.Store = (*Store)(nil)

// New returns a store on cli. The client stays the caller's to close.
func New(cli *clientv3.Client, opts Options) *Store {
	if opts.JournalSize <= 0 {
		opts.JournalSize = store.DefaultJournalSize
	}
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = 128
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	return &Store{cli: cli, prefix: strings.TrimSuffix(opts.Prefix, "/"), journalSize: uint64(opts.JournalSize),
		maxOps: opts.MaxTxnOps, fence: opts.Fence, timeout: opts.Timeout}
}

// SetFence replaces the fence (nil: unguarded).
func (s *Store) SetFence(f Fence) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fence = f
}

// Prefix returns the key prefix.
func (s *Store) Prefix() string { return s.prefix }

// MetaKey, SitesPrefix, EventsPrefix and CursorsPrefix are the keys of
// the state (for watchers).
func (s *Store) MetaKey() string       { return s.prefix + "/meta" }
func (s *Store) SitesPrefix() string   { return s.prefix + "/sites/" }
func (s *Store) EventsPrefix() string  { return s.prefix + "/events/" }
func (s *Store) CursorsPrefix() string { return s.prefix + "/cursors/" }

// ProbedPrefix holds the scheduler's probe marks (store.Probe), one key
// per site, written by rounds that probe only some of the sites.
func (s *Store) ProbedPrefix() string { return s.prefix + "/probed/" }

func (s *Store) eventKey(seq uint64) string { return fmt.Sprintf("%s%020d", s.EventsPrefix(), seq) }

func (s *Store) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	return nil
}

// Load reads the state in one consistent snapshot.
func (s *Store) Load(ctx context.Context) (*store.State, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.check(); err != nil {
		return nil, err
	}
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.MetaKey()),
		clientv3.OpGet(s.SitesPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(s.CursorsPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(s.ProbedPrefix(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("store: loading the state from etcd under %s: %w", s.prefix, err)
	}
	st := &store.State{Sites: map[string]store.Site{}, Cursors: map[string]uint64{}}
	metaKVs := resp.Responses[0].GetResponseRange().Kvs
	var rev int64
	if len(metaKVs) == 1 {
		if err := json.Unmarshal(metaKVs[0].Value, &st.Meta); err != nil {
			return nil, fmt.Errorf("store: meta record %s: %w", s.MetaKey(), err)
		}
		rev = metaKVs[0].ModRevision
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var site store.Site
		if err := json.Unmarshal(kv.Value, &site); err != nil {
			return nil, fmt.Errorf("store: site record %s: %w", kv.Key, err)
		}
		st.Sites[strings.TrimPrefix(string(kv.Key), s.SitesPrefix())] = site
	}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		if n, err := strconv.ParseUint(string(kv.Value), 10, 64); err == nil {
			st.Cursors[strings.TrimPrefix(string(kv.Key), s.CursorsPrefix())] = n
		}
	}
	for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
		name := strings.TrimPrefix(string(kv.Key), s.ProbedPrefix())
		site, ok := st.Sites[name]
		round, at, okMark := parseProbe(string(kv.Value))
		if ok && okMark && round > site.LastProbed {
			site.LastProbed, site.LastProbedAt = round, at
			st.Sites[name] = site
		}
	}
	s.mu.Lock()
	s.metaRev = rev
	s.mu.Unlock()
	return st, nil
}

// Cursors reads the counters and the delivery cursors, without the sites.
func (s *Store) Cursors(ctx context.Context) (store.Meta, map[string]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.check(); err != nil {
		return store.Meta{}, nil, err
	}
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.MetaKey()),
		clientv3.OpGet(s.CursorsPrefix(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return store.Meta{}, nil, fmt.Errorf("store: reading the counters from etcd under %s: %w", s.prefix, err)
	}
	var meta store.Meta
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		if err := json.Unmarshal(kvs[0].Value, &meta); err != nil {
			return store.Meta{}, nil, fmt.Errorf("store: meta record %s: %w", s.MetaKey(), err)
		}
	}
	cursors := map[string]uint64{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		if n, err := strconv.ParseUint(string(kv.Value), 10, 64); err == nil {
			cursors[strings.TrimPrefix(string(kv.Key), s.CursorsPrefix())] = n
		}
	}
	return meta, cursors, nil
}

// Commit writes a batch. Sites the fence says this instance does not own
// are skipped. Sites named by the batch's events are written in the same
// transaction as the events and the counters, so a journaled change and
// the state it produced land together or not at all. When everything does
// not fit in one transaction (etcd's --max-txn-ops), the other sites are
// written first in guarded transactions of their own: each is a whole
// record, so a crash between them leaves every site consistent on its own.
func (s *Store) Commit(ctx context.Context, b store.Batch) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.check(); err != nil {
		return err
	}
	s.mu.Lock()
	fence := s.fence
	s.mu.Unlock()
	var writer []clientv3.Cmp
	if fence != nil {
		var ok bool
		if writer, ok = fence.Writer(); !ok {
			return fmt.Errorf("store: round %d not saved: %w (this instance is not the leader)", b.Meta.Round, ErrFenced)
		}
	}
	withEvents := map[string]bool{}
	for _, e := range b.Events {
		withEvents[e.Site] = true
	}
	type put struct {
		key  string
		val  string
		cmps []clientv3.Cmp
	}
	var early, final []put
	var finalDeletes []put
	for _, site := range b.Sites {
		var cmps []clientv3.Cmp
		if fence != nil {
			var ok bool
			if cmps, ok = fence.Site(site.Name); !ok {
				continue
			}
		}
		v, err := json.Marshal(site)
		if err != nil {
			return fmt.Errorf("store: site %s: %w", site.Name, err)
		}
		p := put{key: s.SitesPrefix() + site.Name, val: string(v), cmps: cmps}
		if withEvents[site.Name] {
			final = append(final, p)
		} else {
			early = append(early, p)
		}
	}
	for _, p := range b.Probed {
		var cmps []clientv3.Cmp
		if fence != nil {
			var ok bool
			if cmps, ok = fence.Site(p.Site); !ok {
				continue
			}
		}
		// A probe mark is the scheduler's memory only: it may land before
		// the rest of the round without harm.
		early = append(early, put{key: s.ProbedPrefix() + p.Site, val: formatProbe(p), cmps: cmps})
	}
	for _, name := range b.Deleted {
		var cmps []clientv3.Cmp
		if fence != nil {
			var ok bool
			if cmps, ok = fence.Site(name); !ok {
				continue
			}
		}
		// The probe mark goes with the record; one guard covers both.
		finalDeletes = append(finalDeletes, put{key: s.SitesPrefix() + name, cmps: cmps},
			put{key: s.ProbedPrefix() + name})
	}
	// The final transaction: events, counters, journal pruning, the sites
	// with events and the deletions; the other sites join it while they fit.
	fixed := len(b.Events) + 2 + len(final) + len(finalDeletes)
	if fixed > s.maxOps || len(writer)+1+len(final)+len(finalDeletes) > s.maxOps {
		return fmt.Errorf("store: round %d needs a transaction of %d operations but etcd allows %d: raise etcd's --max-txn-ops and control { store \"etcd\" { max_txn_ops } }, or lower control { sites_per_round }",
			b.Meta.Round, fixed, s.maxOps)
	}
	room := s.maxOps - fixed
	if cmpRoom := s.maxOps - len(writer) - 1 - len(final) - len(finalDeletes); cmpRoom < room {
		room = cmpRoom
	}
	if len(early) <= room {
		final = append(final, early...)
		early = nil
	}
	chunk := s.maxOps - len(writer)
	if chunk > s.maxOps {
		chunk = s.maxOps
	}
	for len(early) > 0 {
		n := min(len(early), chunk)
		cmps := append([]clientv3.Cmp{}, writer...)
		ops := make([]clientv3.Op, 0, n)
		for _, p := range early[:n] {
			cmps = append(cmps, p.cmps...)
			ops = append(ops, clientv3.OpPut(p.key, p.val))
		}
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("store: saving round %d to etcd: %w", b.Meta.Round, err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("store: round %d not saved: %w", b.Meta.Round, ErrFenced)
		}
		early = early[n:]
	}
	var guard []clientv3.Cmp
	guard = append(guard, writer...)
	for _, p := range final {
		guard = append(guard, p.cmps...)
	}
	for _, p := range finalDeletes {
		guard = append(guard, p.cmps...)
	}
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		rev := s.metaRev
		s.mu.Unlock()
		stored, rev, err := s.readMeta(ctx, rev)
		if err != nil {
			return err
		}
		meta := store.Meta{Round: max(stored.Round, b.Meta.Round), LastEvent: stored.LastEvent + uint64(len(b.Events)),
			Publication: max(stored.Publication, b.Meta.Publication), PublicationDigest: stored.PublicationDigest,
			ProbedAll: stored.ProbedAll, ProbedAllAt: stored.ProbedAllAt}
		if b.Meta.Publication >= stored.Publication {
			meta.PublicationDigest = b.Meta.PublicationDigest
		}
		if b.Meta.ProbedAll > stored.ProbedAll {
			meta.ProbedAll, meta.ProbedAllAt = b.Meta.ProbedAll, b.Meta.ProbedAllAt
		}
		metaVal, _ := json.Marshal(meta)
		ops := []clientv3.Op{clientv3.OpPut(s.MetaKey(), string(metaVal))}
		for _, p := range final {
			ops = append(ops, clientv3.OpPut(p.key, p.val))
		}
		for _, p := range finalDeletes {
			ops = append(ops, clientv3.OpDelete(p.key))
		}
		// Keep the newest journalSize events: older ones are deleted, and
		// new ones already too old are not written (etcd refuses a put and
		// a delete of one key in one transaction).
		var cutoff uint64
		if meta.LastEvent > s.journalSize {
			cutoff = meta.LastEvent - s.journalSize
		}
		for i, e := range b.Events {
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
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("store: saving round %d to etcd: %w", b.Meta.Round, err)
		}
		if resp.Succeeded {
			s.mu.Lock()
			s.metaRev = resp.Header.Revision
			s.mu.Unlock()
			return nil
		}
		// Either the fence failed or another instance moved the counters:
		// find out which with the guard alone.
		if len(guard) > 0 {
			g, err := s.cli.Txn(ctx).If(guard...).Commit()
			if err != nil {
				return fmt.Errorf("store: saving round %d to etcd: %w", b.Meta.Round, err)
			}
			if !g.Succeeded {
				return fmt.Errorf("store: round %d not saved: %w", b.Meta.Round, ErrFenced)
			}
		}
		if attempt >= 50 {
			return fmt.Errorf("store: round %d not saved: the counters at %s kept changing under 50 attempts", b.Meta.Round, s.MetaKey())
		}
		s.mu.Lock()
		s.metaRev = -1 // re-read
		s.mu.Unlock()
	}
}

// readMeta returns the stored counters and their mod revision; when rev
// is the known revision (>= 0) it still reads, since the counters are
// small and the read keeps event numbering exact.
func (s *Store) readMeta(ctx context.Context, _ int64) (store.Meta, int64, error) {
	var m store.Meta
	resp, err := s.cli.Get(ctx, s.MetaKey())
	if err != nil {
		return m, 0, fmt.Errorf("store: reading %s: %w", s.MetaKey(), err)
	}
	if len(resp.Kvs) == 0 {
		return m, 0, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
		return m, 0, fmt.Errorf("store: meta record %s: %w", s.MetaKey(), err)
	}
	return m, resp.Kvs[0].ModRevision, nil
}

// Events reads the journal, oldest first.
func (s *Store) Events(ctx context.Context, after uint64, site string, limit int) ([]store.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 100
	}
	var out []store.Event
	from := s.eventKey(after + 1)
	end := clientv3.GetPrefixRangeEnd(s.EventsPrefix())
	for len(out) < limit {
		page := int64(limit - len(out))
		if site != "" {
			page = 500
		}
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(page))
		if err != nil {
			return nil, fmt.Errorf("store: reading events from etcd: %w", err)
		}
		for _, kv := range resp.Kvs {
			var e store.Event
			if err := json.Unmarshal(kv.Value, &e); err != nil {
				return nil, fmt.Errorf("store: event %s: %w", kv.Key, err)
			}
			if (site == "" || e.Site == site) && len(out) < limit {
				out = append(out, e)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	return out, nil
}

// SetCursor records a notifier's delivery cursor, guarded by the fence's
// Notifier comparisons.
func (s *Store) SetCursor(ctx context.Context, notifier string, seq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.check(); err != nil {
		return err
	}
	s.mu.Lock()
	fence := s.fence
	s.mu.Unlock()
	var cmps []clientv3.Cmp
	if fence != nil {
		var ok bool
		if cmps, ok = fence.Notifier(); !ok {
			return fmt.Errorf("store: the delivery cursor of %s not saved: %w (this instance does not deliver notifications)", notifier, ErrFenced)
		}
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(s.CursorsPrefix()+notifier, strconv.FormatUint(seq, 10))).Commit()
	if err != nil {
		return fmt.Errorf("store: saving the delivery cursor of %s to etcd: %w", notifier, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("store: the delivery cursor of %s not saved: %w", notifier, ErrFenced)
	}
	return nil
}

// Close marks the store closed; the etcd client is the caller's.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// formatProbe and parseProbe are a probe mark's value: the round and the
// time in Unix nanoseconds.
func formatProbe(p store.Probe) string {
	return strconv.FormatUint(p.Round, 10) + " " + strconv.FormatInt(p.At.UnixNano(), 10)
}

func parseProbe(v string) (round uint64, at time.Time, ok bool) {
	r, t, found := strings.Cut(v, " ")
	if !found {
		return 0, time.Time{}, false
	}
	round, err1 := strconv.ParseUint(r, 10, 64)
	ns, err2 := strconv.ParseInt(t, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, time.Time{}, false
	}
	return round, time.Unix(0, ns).UTC(), true
}
