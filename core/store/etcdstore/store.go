package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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
	// never waits on an unreachable etcd for longer: Load, Events,
	// SetCursor and a commit that fits in one transaction as a whole,
	// each transaction of a split commit on its own.
	Timeout time.Duration
	// AfterTxn, for tests, runs after each transaction of a split commit
	// (step "staged N", "marker", "copied N": the Nth chunk). When it returns an error,
	// Commit returns it at once and writes nothing more, not even its
	// clean-up: as if the process died there.
	AfterTxn func(step string) error
}

// Store is the etcd implementation of store.Store. It is safe for
// concurrent use.
type Store struct {
	cli         *clientv3.Client
	prefix      string
	journalSize uint64
	maxOps      int
	timeout     time.Duration

	afterTxn func(string) error
	// configuredOps is max_txn_ops as configured; maxOps (under mu) the
	// limit used, lowered by ProbeLimit to what etcd takes.
	configuredOps int

	mu          sync.Mutex
	fence       Fence
	metaRev     int64 // mod revision of P/meta last seen
	closed      bool
	pendingSets bool      // a committed split commit may not be copied to its keys yet
	lastSweep   time.Time // when sweep last looked for abandoned staged sets
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
		maxOps: opts.MaxTxnOps, configuredOps: opts.MaxTxnOps, fence: opts.Fence, timeout: opts.Timeout, afterTxn: opts.AfterTxn}
}

// limit is the most operations (and comparisons) one transaction may have.
func (s *Store) limit() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxOps
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

// Load reads the state in one consistent snapshot (one etcd revision).
// The records of committed split commits not yet copied to their keys
// are read from their staged sets (doc.go).
func (s *Store) Load(ctx context.Context) (*store.State, error) {
	st, _, err := s.LoadSince(ctx, 0)
	return st, err
}

// LoadSince is Load of what changed after etcd revision since: the
// counters and the delivery cursors whole, and only the sites whose
// record was written after since, on its key or in a split commit
// committed after since. A site whose record did not change is absent
// from State.Sites (and so is one whose probe mark alone changed: probe
// times are not state). rev is the revision it read at: the since of
// the next call. since 0 reads everything, as Load.
//
// A shard follows the others' commits with it: each commit costs it the
// sites that commit wrote, not the whole store.
func (s *Store) LoadSince(ctx context.Context, since int64) (*store.State, int64, error) {
	type read struct {
		st  *store.State
		rev int64
	}
	r, err := retryCompacted(func() (read, error) {
		st, rev, err := s.loadSince(ctx, since)
		return read{st, rev}, err
	})
	return r.st, r.rev, err
}

// loadSince is LoadSince's one try: its reads of staged sets are at the
// revision of its first read, which a compaction may remove.
func (s *Store) loadSince(ctx context.Context, since int64) (*store.State, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	var changed []clientv3.OpOption
	if since > 0 {
		changed = []clientv3.OpOption{clientv3.WithMinModRev(since + 1)}
	}
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.MetaKey()),
		clientv3.OpGet(s.SitesPrefix(), append([]clientv3.OpOption{clientv3.WithPrefix()}, changed...)...),
		clientv3.OpGet(s.CursorsPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(s.ProbedPrefix(), append([]clientv3.OpOption{clientv3.WithPrefix()}, changed...)...),
		clientv3.OpGet(s.ApplyingPrefix(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("store: loading the state from etcd under %s: %w", s.prefix, err)
	}
	r := stateRead{
		rev:     resp.Header.Revision,
		meta:    resp.Responses[0].GetResponseRange().Kvs,
		sites:   resp.Responses[1].GetResponseRange().Kvs,
		cursors: resp.Responses[2].GetResponseRange().Kvs,
		probes:  resp.Responses[3].GetResponseRange().Kvs,
		markers: resp.Responses[4].GetResponseRange().Kvs,
	}
	st, err := s.decodeState(ctx, r, since, nil)
	if err != nil {
		return nil, 0, err
	}
	return st, resp.Header.Revision, nil
}

// stateRead is what one read of the state found, at etcd revision rev:
// the counters, site records, delivery cursors, probe marks and commit
// markers.
type stateRead struct {
	rev                                   int64
	meta, sites, cursors, probes, markers []*mvccpb.KeyValue
}

// decodeState is the state Load, LoadSince and LoadSites read: a site's
// committed split record wins over its key unless the key was written
// after the set's marker; since > 0 keeps the sets committed after since
// only; only, when not nil, keeps the staged records of those sites only.
func (s *Store) decodeState(ctx context.Context, resp stateRead, since int64, only map[string]bool) (*store.State, error) {
	st := &store.State{Sites: map[string]store.Site{}, Cursors: map[string]uint64{}}
	metaKVs := resp.meta
	var rev int64
	if len(metaKVs) == 1 {
		if err := json.Unmarshal(metaKVs[0].Value, &st.Meta); err != nil {
			return nil, fmt.Errorf("store: meta record %s: %w", s.MetaKey(), err)
		}
		rev = metaKVs[0].ModRevision
	}
	ms, err := s.markers(resp.markers)
	if err != nil {
		return nil, err
	}
	all := len(ms) > 0
	if since > 0 {
		// An older set was read by the call that returned since (its
		// later copy to the keys shows as a change of the keys).
		ms = slices.DeleteFunc(ms, func(m marker) bool { return m.rev <= since })
	}
	var stagedSites, stagedProbes map[string]stagedSite
	if len(ms) > 0 {
		if stagedSites, stagedProbes, err = s.overlay(ctx, resp.rev, ms); err != nil {
			return nil, err
		}
		if only != nil {
			maps.DeleteFunc(stagedSites, func(name string, _ stagedSite) bool { return !only[name] })
			maps.DeleteFunc(stagedProbes, func(name string, _ stagedSite) bool { return !only[name] })
		}
	}
	siteRevs := map[string]int64{}
	for _, kv := range resp.sites {
		var site store.Site
		if err := json.Unmarshal(kv.Value, &site); err != nil {
			return nil, fmt.Errorf("store: site record %s: %w", kv.Key, err)
		}
		name := strings.TrimPrefix(string(kv.Key), s.SitesPrefix())
		st.Sites[name] = site
		siteRevs[name] = kv.ModRevision
	}
	// A committed set's record wins over the key unless the key was
	// written after the set's marker.
	for name, sv := range stagedSites {
		if siteRevs[name] >= sv.rev {
			continue
		}
		if sv.del {
			delete(st.Sites, name)
			continue
		}
		var site store.Site
		if err := json.Unmarshal(sv.val, &site); err != nil {
			return nil, fmt.Errorf("store: staged record of site %s: %w", name, err)
		}
		st.Sites[name] = site
	}
	for _, kv := range resp.cursors {
		if n, err := strconv.ParseUint(string(kv.Value), 10, 64); err == nil {
			st.Cursors[strings.TrimPrefix(string(kv.Key), s.CursorsPrefix())] = n
		}
	}
	marks := map[string]string{}
	markRevs := map[string]int64{}
	for _, kv := range resp.probes {
		name := strings.TrimPrefix(string(kv.Key), s.ProbedPrefix())
		marks[name], markRevs[name] = string(kv.Value), kv.ModRevision
	}
	for name, sv := range stagedProbes {
		if markRevs[name] < sv.rev {
			marks[name] = string(sv.val)
		}
	}
	for name, v := range marks {
		site, ok := st.Sites[name]
		round, at, okMark := parseProbe(v)
		if ok && okMark && round > site.LastProbed {
			site.LastProbed, site.LastProbedAt = round, at
			st.Sites[name] = site
		}
	}
	s.mu.Lock()
	s.metaRev = rev
	if all {
		s.pendingSets = true // the next commit copies them to their keys
	}
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

// readMeta returns the stored counters and their mod revision.
func (s *Store) readMeta(ctx context.Context) (store.Meta, int64, error) {
	var m store.Meta
	resp, err := s.get(ctx, s.MetaKey())
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

// Events reads the journal, oldest first, in one snapshot: the events of
// committed split commits not yet copied to their keys are read from
// their staged sets (doc.go).
func (s *Store) Events(ctx context.Context, after uint64, site string, limit int) ([]store.Event, error) {
	return retryCompacted(func() ([]store.Event, error) { return s.events(ctx, after, site, limit) })
}

// events is Events' one try: its pages are read at the revision of its
// first read, which a compaction may remove.
func (s *Store) events(ctx context.Context, after uint64, site string, limit int) ([]store.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 100
	}
	head, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.MetaKey()),
		clientv3.OpGet(s.ApplyingPrefix(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("store: reading events from etcd: %w", err)
	}
	rev := head.Header.Revision
	ms, err := s.markers(head.Responses[1].GetResponseRange().Kvs)
	if err != nil {
		return nil, err
	}
	var staged map[uint64]store.Event
	if len(ms) > 0 {
		var meta store.Meta
		if kvs := head.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			if err := json.Unmarshal(kvs[0].Value, &meta); err != nil {
				return nil, fmt.Errorf("store: meta record %s: %w", s.MetaKey(), err)
			}
		}
		if staged, err = s.stagedEvents(ctx, rev, ms, max(after, s.cutoff(meta.LastEvent))); err != nil {
			return nil, err
		}
	}
	var out []store.Event
	from := s.eventKey(after + 1)
	end := clientv3.GetPrefixRangeEnd(s.EventsPrefix())
	for len(out) < limit {
		page := int64(limit - len(out))
		if site != "" {
			page = 500
		}
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(page), clientv3.WithRev(rev))
		if err != nil {
			return nil, fmt.Errorf("store: reading events from etcd: %w", err)
		}
		for _, kv := range resp.Kvs {
			var e store.Event
			if err := json.Unmarshal(kv.Value, &e); err != nil {
				return nil, fmt.Errorf("store: event %s: %w", kv.Key, err)
			}
			delete(staged, e.Seq) // copied already
			if (site == "" || e.Site == site) && len(out) < limit {
				out = append(out, e)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	if len(staged) == 0 {
		return out, nil
	}
	// Merge: every event the pages did not reach has a higher number than
	// those they returned, so the first limit of the merge are right.
	for seq, e := range staged {
		if len(out) == limit && seq > out[len(out)-1].Seq {
			continue
		}
		if site == "" || e.Site == site {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	if len(out) > limit {
		out = out[:limit]
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
