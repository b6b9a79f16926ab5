package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/core/store"
)

// StagedPrefix holds the staged sets of split commits (P/staged/ID/...),
// ApplyingPrefix their commit markers (P/applying/ID). See doc.go.
func (s *Store) StagedPrefix() string   { return s.prefix + "/staged/" }
func (s *Store) ApplyingPrefix() string { return s.prefix + "/applying/" }

// stagingKey is the head of staged set id: created by its first chunk,
// its value the time it was (Unix nanoseconds), so that sweep can tell an
// abandoned set from one being written.
func (s *Store) stagingKey(id string) string { return s.prefix + "/staging/" + id }

// marker is one committed split commit, as a reader finds it.
type marker struct {
	id   string
	rev  int64  // the marker's revision: keys written later are newer than the set
	base uint64 // its events are base+1 ... base+events
	n    int
}

func (s *Store) markers(kvs []*mvccpb.KeyValue) ([]marker, error) {
	var ms []marker
	for _, kv := range kvs {
		base, n, err := parseSet(string(kv.Value))
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", kv.Key, err)
		}
		ms = append(ms, marker{id: strings.TrimPrefix(string(kv.Key), s.ApplyingPrefix()), rev: kv.CreateRevision, base: base, n: n})
	}
	return ms, nil
}

// stagedSite is a site's record (or its deletion, del) in a committed
// set, and the marker's revision.
type stagedSite struct {
	val []byte
	del bool
	rev int64
}

// overlay reads, at revision rev, the sites and probe marks of the
// committed sets ms, newest marker last: what readers take over the keys
// of the sites not written since.
func (s *Store) overlay(ctx context.Context, rev int64, ms []marker) (sites, probes map[string]stagedSite, err error) {
	sites, probes = map[string]stagedSite{}, map[string]stagedSite{}
	for _, m := range ms {
		dir := s.StagedPrefix() + m.id + "/"
		resp, err := s.txn(ctx).Then(
			clientv3.OpGet(dir+"sites/", clientv3.WithPrefix(), clientv3.WithRev(rev)),
			clientv3.OpGet(dir+"probed/", clientv3.WithPrefix(), clientv3.WithRev(rev)),
		).Commit()
		if err != nil {
			return nil, nil, fmt.Errorf("store: reading the split commit %s from etcd: %w", m.id, err)
		}
		for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
			name := strings.TrimPrefix(string(kv.Key), dir+"sites/")
			if old, ok := sites[name]; !ok || old.rev < m.rev {
				sites[name] = stagedSite{val: kv.Value, del: len(kv.Value) == 0, rev: m.rev}
			}
		}
		for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
			name := strings.TrimPrefix(string(kv.Key), dir+"probed/")
			if old, ok := probes[name]; !ok || old.rev < m.rev {
				probes[name] = stagedSite{val: kv.Value, rev: m.rev}
			}
		}
	}
	return sites, probes, nil
}

// stagedEvents reads, at revision rev, the events of the committed sets
// ms with a sequence number above after, numbered.
func (s *Store) stagedEvents(ctx context.Context, rev int64, ms []marker, after uint64) (map[uint64]store.Event, error) {
	out := map[uint64]store.Event{}
	for _, m := range ms {
		if m.n == 0 || m.base+uint64(m.n) <= after {
			continue
		}
		dir := s.StagedPrefix() + m.id + "/events/"
		resp, err := s.get(ctx, dir, clientv3.WithPrefix(), clientv3.WithRev(rev))
		if err != nil {
			return nil, fmt.Errorf("store: reading the events of the split commit %s from etcd: %w", m.id, err)
		}
		for _, kv := range resp.Kvs {
			i, err := strconv.ParseUint(strings.TrimPrefix(string(kv.Key), dir), 10, 64)
			if err != nil {
				continue
			}
			var e store.Event
			if err := json.Unmarshal(kv.Value, &e); err != nil {
				return nil, fmt.Errorf("store: event %s: %w", kv.Key, err)
			}
			e.Seq = m.base + i + 1
			if e.Seq > after {
				out[e.Seq] = e
			}
		}
	}
	return out, nil
}

// rollForwardDue reports whether a committed split commit may not be
// copied to its keys yet: one of ours was cut short, or a read found one.
func (s *Store) rollForwardDue() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pendingSets
}

// rollForward copies every committed split commit to its keys and
// removes it (any instance may: the copy is guarded key by key, and
// idempotent).
func (s *Store) rollForward(ctx context.Context) error {
	resp, err := s.txn(ctx).Then(
		clientv3.OpGet(s.ApplyingPrefix(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return fmt.Errorf("store: reading the split commits from etcd: %w", err)
	}
	ms, err := s.markers(resp.Responses[0].GetResponseRange().Kvs)
	if err != nil {
		return err
	}
	rev := resp.Header.Revision
	// The newest first: an older set's copy never lands over a newer one's
	// (applySet refuses while a newer one is committed).
	sort.Slice(ms, func(i, j int) bool { return ms[i].rev > ms[j].rev })
	for _, m := range ms {
		dir := s.StagedPrefix() + m.id + "/"
		sr, err := s.get(ctx, dir, clientv3.WithPrefix(), clientv3.WithRev(rev))
		if err != nil {
			return fmt.Errorf("store: reading the split commit %s from etcd: %w", m.id, err)
		}
		var ws []write
		for _, kv := range sr.Kvs {
			rel := strings.TrimPrefix(string(kv.Key), dir)
			kind, name, _ := strings.Cut(rel, "/")
			switch kind {
			case "sites":
				ws = append(ws, write{key: s.SitesPrefix() + name, val: string(kv.Value), del: len(kv.Value) == 0, name: name, event: -1})
			case "probed":
				ws = append(ws, write{key: s.ProbedPrefix() + name, val: string(kv.Value), probe: true, name: name, event: -1})
			case "events":
				i, err := strconv.ParseUint(name, 10, 64)
				if err != nil {
					continue
				}
				var e store.Event
				if err := json.Unmarshal(kv.Value, &e); err != nil {
					return fmt.Errorf("store: event %s: %w", kv.Key, err)
				}
				e.Seq = m.base + i + 1
				v, _ := json.Marshal(e)
				ws = append(ws, write{key: s.eventKey(e.Seq), val: string(v), event: int(i)})
			}
		}
		if err := s.applySet(ctx, m.id, m.rev, ws, true); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.pendingSets = false
	s.mu.Unlock()
	return nil
}

// errNewerSet stops the copy of a split commit while a newer one is
// committed and not copied yet: the newer one is copied first.
var errNewerSet = errors.New("a newer split commit is not copied yet")

// applySet copies the writes of committed set id (marker at markerRev) to
// their keys, in chunks, then removes the set. A key is copied only if
// nothing wrote it since the marker, and only while no newer set is
// committed (rollForward copies the newest first): so an older set never
// lands over a newer one, and a reader's rule (doc.go) keeps holding.
// Events the journal no longer keeps are not copied.
//
// reread says to read first which keys were written since the marker
// (rollForward, after a crash or a cut-short copy), so that a copy done
// in part is not redone key by key; a writer copying its own set right
// after its marker skips that read.
func (s *Store) applySet(ctx context.Context, id string, markerRev int64, ws []write, reread bool) error {
	stored, _, err := s.readMeta(ctx)
	if err != nil {
		return err
	}
	cutoff := s.cutoff(stored.LastEvent)
	// What the keys hold now: one written since the marker (by a later
	// commit, or by an earlier copy of this set) is not copied again.
	modRev := map[string]int64{}
	if reread {
		if err := s.modRevs(ctx, id, ws, modRev); err != nil {
			return err
		}
	}
	type one struct {
		cmps []clientv3.Cmp
		ops  []clientv3.Op
		size int
	}
	older := func(key string) clientv3.Cmp { return clientv3.Compare(clientv3.ModRevision(key), "<", markerRev) }
	newest := clientv3.Compare(clientv3.CreateRevision(s.ApplyingPrefix()), "<", markerRev+1).WithPrefix()
	var all []one
	for _, w := range ws {
		if modRev[w.key] >= markerRev {
			continue
		}
		switch {
		case w.event >= 0 && !w.probe && strings.HasPrefix(w.key, s.EventsPrefix()):
			seq, _ := strconv.ParseUint(strings.TrimPrefix(w.key, s.EventsPrefix()), 10, 64)
			if seq <= cutoff {
				continue
			}
			all = append(all, one{[]clientv3.Cmp{older(w.key)}, []clientv3.Op{clientv3.OpPut(w.key, w.val)}, len(w.key) + len(w.val)})
		case w.del && !w.probe:
			pk := s.ProbedPrefix() + w.name
			all = append(all, one{[]clientv3.Cmp{older(w.key), older(pk)}, []clientv3.Op{clientv3.OpDelete(w.key), clientv3.OpDelete(pk)}, len(w.key) + len(pk)})
		case w.del:
			// with the site's deletion
		default:
			all = append(all, one{[]clientv3.Cmp{older(w.key)}, []clientv3.Op{clientv3.OpPut(w.key, w.val)}, len(w.key) + len(w.val)})
		}
	}
	limit := s.limit()
	chunks := 0
	for i := 0; i < len(all); {
		cmps := []clientv3.Cmp{newest}
		var ops []clientv3.Op
		j, size := i, 0
		for j < len(all) && len(ops)+len(all[j].ops) <= limit && len(cmps)+len(all[j].cmps) <= limit &&
			(j == i || size+all[j].size <= maxTxnBytes) {
			cmps = append(cmps, all[j].cmps...)
			ops = append(ops, all[j].ops...)
			size += all[j].size
			j++
		}
		resp, err := s.txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("store: copying the split commit %s to its keys: %w", id, err)
		}
		if !resp.Succeeded {
			g, err := s.txn(ctx).If(newest).Commit()
			if err != nil {
				return fmt.Errorf("store: copying the split commit %s to its keys: %w", id, err)
			}
			if !g.Succeeded {
				return fmt.Errorf("store: copying the split commit %s to its keys: %w", id, errNewerSet)
			}
			// Some key was written after the marker (a later commit): the
			// others of the chunk are copied one by one.
			for _, o := range all[i:j] {
				r, err := s.txn(ctx).If(append([]clientv3.Cmp{newest}, o.cmps...)...).Then(o.ops...).Commit()
				if err != nil {
					return fmt.Errorf("store: copying the split commit %s to its keys: %w", id, err)
				}
				if !r.Succeeded {
					if g, err := s.txn(ctx).If(newest).Commit(); err != nil || !g.Succeeded {
						return fmt.Errorf("store: copying the split commit %s to its keys: %w", id, errNewerSet)
					}
				}
			}
		}
		i = j
		chunks++
		if err := s.hook("copied " + strconv.Itoa(chunks)); err != nil {
			return err
		}
	}
	_, err = s.txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(s.ApplyingPrefix()+id), "=", markerRev)).
		Then(clientv3.OpDelete(s.ApplyingPrefix()+id), clientv3.OpDelete(s.stagingKey(id)),
			clientv3.OpDelete(s.StagedPrefix()+id+"/", clientv3.WithPrefix())).Commit()
	if err != nil {
		return fmt.Errorf("store: removing the split commit %s: %w", id, err)
	}
	return nil
}

// sweepAge is how old an uncommitted staged set must be to be removed:
// far longer than any commit may take.
func (s *Store) sweepAge() time.Duration { return max(2*time.Minute, 4*s.timeout) }

// sweep removes, at most once a minute, the staged sets of split commits
// that never got their marker (their writer died or gave up) and are
// older than sweepAge. A set whose marker lands meanwhile is kept.
func (s *Store) sweep(ctx context.Context) {
	s.mu.Lock()
	if time.Since(s.lastSweep) < time.Minute {
		s.mu.Unlock()
		return
	}
	s.lastSweep = time.Now()
	s.mu.Unlock()
	resp, err := s.get(ctx, s.prefix+"/staging/", clientv3.WithPrefix())
	if err != nil {
		return
	}
	for _, kv := range resp.Kvs {
		ns, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err == nil && time.Since(time.Unix(0, ns)) < s.sweepAge() {
			continue
		}
		id := strings.TrimPrefix(string(kv.Key), s.prefix+"/staging/")
		_, _ = s.txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(s.ApplyingPrefix()+id), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).
			Then(clientv3.OpDelete(string(kv.Key)), clientv3.OpDelete(s.StagedPrefix()+id+"/", clientv3.WithPrefix())).Commit()
	}
}

// modRevs records in modRev the mod revisions of the keys ws would copy
// to: the site and probe keys one by one (keys only, max_txn_ops reads a
// transaction), never the whole prefixes, so that a roll-forward costs
// what the set wrote, not the size of the store; and the set's events
// as one range. The revisions are hints only: every copy is guarded by
// the key's mod revision anyway.
func (s *Store) modRevs(ctx context.Context, id string, ws []write, modRev map[string]int64) error {
	var lo, hi uint64
	var keys []string
	for _, w := range ws {
		if w.event >= 0 && !w.probe && strings.HasPrefix(w.key, s.EventsPrefix()) {
			seq, _ := strconv.ParseUint(strings.TrimPrefix(w.key, s.EventsPrefix()), 10, 64)
			if lo == 0 || seq < lo {
				lo = seq
			}
			hi = max(hi, seq)
			continue
		}
		keys = append(keys, w.key)
		if w.del && !w.probe {
			keys = append(keys, s.ProbedPrefix()+w.name)
		}
	}
	var ops []clientv3.Op
	if hi > 0 {
		ops = append(ops, clientv3.OpGet(s.eventKey(lo), clientv3.WithRange(s.eventKey(hi+1)), clientv3.WithKeysOnly()))
	}
	limit := s.limit()
	for len(ops) > 0 || len(keys) > 0 {
		for len(ops) < limit && len(keys) > 0 {
			ops = append(ops, clientv3.OpGet(keys[0], clientv3.WithKeysOnly()))
			keys = keys[1:]
		}
		now, err := s.txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("store: copying the split commit %s to its keys: %w", id, err)
		}
		for _, r := range now.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				modRev[string(kv.Key)] = kv.ModRevision
			}
		}
		ops = ops[:0]
	}
	return nil
}
