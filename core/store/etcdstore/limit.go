package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// isTooManyOps reports whether etcd refused a transaction for having more
// operations than its --max-txn-ops.
func isTooManyOps(err error) bool {
	return err != nil && errors.Is(rpctypes.Error(err), rpctypes.ErrTooManyOps)
}

// MaxTxnOps returns the most operations the store puts in one
// transaction: max_txn_ops, or less when ProbeLimit found that etcd takes
// less.
func (s *Store) MaxTxnOps() int { return s.limit() }

// ProbeLimit finds how many operations etcd takes in one transaction, up
// to the configured max_txn_ops, and from then on splits commits by the
// smaller of the two. etcd does not report its --max-txn-ops, so it asks
// with transactions of n comparisons and nothing else, which write
// nothing (etcd answers them as reads): one when the configured value is
// accepted, a binary search down from it when not. It returns the limit
// now used and the one configured.
func (s *Store) ProbeLimit(ctx context.Context) (used, configured int, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	s.mu.Lock()
	configured = s.configuredOps
	s.mu.Unlock()
	accepts := func(n int) (bool, error) {
		cmps := make([]clientv3.Cmp, n)
		for i := range cmps {
			cmps[i] = clientv3.Compare(clientv3.CreateRevision(s.MetaKey()), ">", -1)
		}
		_, err := s.cli.Txn(ctx).If(cmps...).Commit()
		switch {
		case err == nil:
			return true, nil
		case isTooManyOps(err):
			return false, nil
		}
		return false, fmt.Errorf("store: asking etcd how many operations a transaction may have: %w", err)
	}
	ok, err := accepts(configured)
	if err != nil {
		return 0, configured, err
	}
	used = configured
	if !ok {
		// accepts(lo) is true (etcd takes at least one), accepts(hi) false.
		lo, hi := 1, configured
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			ok, err := accepts(mid)
			if err != nil {
				return 0, configured, err
			}
			if ok {
				lo = mid
			} else {
				hi = mid
			}
		}
		used = lo
	}
	s.mu.Lock()
	s.maxOps = used
	s.mu.Unlock()
	return used, configured, nil
}
