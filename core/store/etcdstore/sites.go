package etcdstore

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/vigilcdn/vigil/core/store"
)

// loadSitesParallel is how many of LoadSites' transactions are in flight
// at once.
const loadSitesParallel = 4

// LoadSites is Load of the named sites only: the counters and the
// delivery cursors whole, and of each named site its record and probe
// mark (a committed split commit's staged record wins, as for Load). A
// named site with no record is absent from State.Sites: none is stored.
// Everything is read at one etcd revision, rev, the first transaction's:
// the keys in transactions of max_txn_ops reads (two a site), a few in
// flight at once, so a shard that claimed K sites reads about K records,
// never the whole store.
//
// A sharded instance reloads with it the sites it just claimed, before
// it probes them, and the sites it hands over (the handover's barrier).
func (s *Store) LoadSites(ctx context.Context, names []string) (*store.State, int64, error) {
	type read struct {
		st  *store.State
		rev int64
	}
	r, err := retryCompacted(func() (read, error) {
		st, rev, err := s.loadSites(ctx, names)
		return read{st, rev}, err
	})
	return r.st, r.rev, err
}

// loadSites is LoadSites' one try: its reads after the first are at the
// first's revision, which a compaction may remove.
func (s *Store) loadSites(ctx context.Context, names []string) (st *store.State, rev int64, err error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	head, err := s.txn(ctx).Then(
		clientv3.OpGet(s.MetaKey()),
		clientv3.OpGet(s.CursorsPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(s.ApplyingPrefix(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("store: loading the counters from etcd under %s: %w", s.prefix, err)
	}
	r := stateRead{
		rev:     head.Header.Revision,
		meta:    head.Responses[0].GetResponseRange().Kvs,
		cursors: head.Responses[1].GetResponseRange().Kvs,
		markers: head.Responses[2].GetResponseRange().Kvs,
	}
	per := max(s.limit()/2, 1)
	type chunk struct{ sites, probes []*mvccpb.KeyValue }
	chunks := make([]chunk, (len(names)+per-1)/per)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(loadSitesParallel)
	for c := range chunks {
		part := names[c*per : min((c+1)*per, len(names))]
		g.Go(func() error {
			ops := make([]clientv3.Op, 0, 2*len(part))
			for _, name := range part {
				ops = append(ops,
					clientv3.OpGet(s.SitesPrefix()+name, clientv3.WithRev(r.rev)),
					clientv3.OpGet(s.ProbedPrefix()+name, clientv3.WithRev(r.rev)))
			}
			resp, err := s.txn(gctx).Then(ops...).Commit()
			if err != nil {
				return fmt.Errorf("store: loading %d sites (%s...) from etcd under %s: %w", len(part), part[0], s.prefix, err)
			}
			for i, rr := range resp.Responses {
				kvs := rr.GetResponseRange().Kvs
				if i%2 == 0 {
					chunks[c].sites = append(chunks[c].sites, kvs...)
				} else {
					chunks[c].probes = append(chunks[c].probes, kvs...)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	for _, c := range chunks {
		r.sites = append(r.sites, c.sites...)
		r.probes = append(r.probes, c.probes...)
	}
	only := make(map[string]bool, len(names))
	for _, name := range names {
		only[name] = true
	}
	if st, err = s.decodeState(ctx, r, 0, only); err != nil {
		return nil, 0, err
	}
	return st, r.rev, nil
}
