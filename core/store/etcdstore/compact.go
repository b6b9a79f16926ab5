package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultCompactionInterval is how often a cluster compacts etcd's
// history when the store block does not say (kube-apiserver's default
// too).
const DefaultCompactionInterval = 5 * time.Minute

// Compactor compacts etcd's history (the old revisions of every key,
// which etcd keeps until told to drop them) so that it does not grow
// until etcd's backend quota refuses every write.
//
// It works as kube-apiserver's compactor does. Each Step is one
// compare-and-swap on P/compact: it succeeds only when the key's version
// is the one this compactor saw at its previous step, so of several
// instances stepping once an interval at most one succeeds per interval.
// The one that succeeds compacts etcd to the revision it saw at its own
// previous step, which is at least one interval old: every read of the
// store is at a revision it saw moments before (or at the current one),
// and a watch starts from a revision just read, so none of them asks for
// a compacted revision unless it stalls for a whole interval; the store's
// reads retry from the current revision when one does (ErrCompacted).
//
// A Compactor is safe for concurrent use; Step calls are serialized.
type Compactor struct {
	cli *clientv3.Client
	key string

	mu      sync.Mutex
	version int64 // P/compact's version at the previous step
	rev     int64 // etcd's revision at the previous step: the next target

	compactions atomic.Int64
	compacted   atomic.Int64
}

// Compactor returns the compactor of this store's cluster, keyed under
// its prefix (P/compact).
func (s *Store) Compactor() *Compactor {
	return &Compactor{cli: s.cli, key: s.CompactKey()}
}

// CompactKey is the key whose version elects the compacting instance of
// an interval.
func (s *Store) CompactKey() string { return s.prefix + "/compact" }

// Compactions counts the compactions this compactor made.
func (c *Compactor) Compactions() int64 { return c.compactions.Load() }

// Compacted is the revision this compactor last compacted etcd to (0
// before its first compaction).
func (c *Compactor) Compacted() int64 { return c.compacted.Load() }

// Step is one interval's turn: it takes the turn (the compare-and-swap)
// if no other instance took it since this compactor's previous step, and
// then compacts etcd to the revision seen at that previous step. It
// returns the revision it compacted to, or 0 when it did not compact
// (another instance took the turn, or this is its first step, which only
// records where it stands).
func (c *Compactor) Step(ctx context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, err := c.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.Version(c.key), "=", c.version),
	).Then(
		clientv3.OpPut(c.key, strconv.FormatInt(c.rev, 10)),
	).Else(
		clientv3.OpGet(c.key),
	).Commit()
	if err != nil {
		return 0, fmt.Errorf("etcd compaction: taking the turn on %s: %w", c.key, err)
	}
	target := c.rev
	c.rev = resp.Header.Revision
	if !resp.Succeeded {
		c.version = 0
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			c.version = kvs[0].Version
		}
		return 0, nil
	}
	c.version++
	if target == 0 {
		return 0, nil
	}
	if _, err := c.cli.Compact(ctx, target); err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			// Compacted further already (etcd's own auto-compaction,
			// or an operator's etcdctl compact): nothing to do.
			return 0, nil
		}
		return 0, fmt.Errorf("etcd compaction to revision %d: %w", target, err)
	}
	c.compactions.Add(1)
	c.compacted.Store(target)
	return target, nil
}

// Run steps once every interval until ctx ends, while active() is true
// (an instance that is not active neither takes a turn nor compacts; its
// first step once active only learns where the others stand). Errors go
// to onErr (nil: dropped); the next interval tries again.
func (c *Compactor) Run(ctx context.Context, interval time.Duration, active func() bool, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if active != nil && !active() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, min(interval, 30*time.Second))
		_, err := c.Step(sctx)
		cancel()
		if err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
	}
}

// retryCompacted runs read again, up to three times, when it fails with
// ErrCompacted: the revision it read at was compacted meanwhile (a read
// that stalled for a whole compaction interval), and a new read starts
// from the current revision, so nothing is lost.
func retryCompacted[T any](read func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range 3 {
		v, err = read()
		if !errors.Is(err, rpctypes.ErrCompacted) {
			return v, err
		}
	}
	return v, err
}
