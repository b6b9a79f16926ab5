package ha

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/core/engine"
)

// ownership (sharded) keeps this node's share: each site goes to the live
// member of highest rendezvous weight. Handover of a site from A to B:
//
//  1. B sees the new member list and wants the site; A sees it too and
//     no longer wants it.
//  2. A stops probing it (Owns turns false) but may still write it, then
//     reloads the sites it releases (only them): the engine
//     discards a round that planned it and is still asking its sources,
//     and the reload waits for one that is committing, so no round that
//     planned the site commits it after this (Apply also skips a site
//     Owns no longer accepts).
//     A then deletes P/owners/SITE if it still has the revision A created.
//  3. B creates P/owners/SITE with its lease only if the key does not
//     exist (create revision 0), reads the site from etcd (the sites it
//     claimed, only them) and hands the records to its engine (Claim),
//     which takes them in before it plans a round or acts, without
//     waiting for a round that is committing; only then does B probe the
//     site, in a takeover round at once or from its next round.
//
// The owner key exists at most once, so at any instant at most one node
// may probe and write the site; A's late writes fail the fence, which
// compares the key's create revision. If A dies, its lease expires and
// its owner keys go with it, and B acquires them then.
func (n *Node) ownership(ctx context.Context, lease clientv3.LeaseID) {
	prefix := n.key("owners") + "/"
	// A release by another member is what a waiting acquirer needs.
	go func() {
		wch := n.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithFilterPut())
		for range wch {
			n.kick()
		}
	}()
	tick := time.NewTicker(max(n.ttl/4, 250*time.Millisecond))
	defer tick.Stop()
	for {
		n.reconcile(ctx, lease)
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		case <-tick.C:
		}
	}
}

func (n *Node) reconcile(ctx context.Context, lease clientv3.LeaseID) {
	n.mu.Lock()
	eng := n.eng
	if eng == nil || n.memberRev == 0 {
		n.mu.Unlock()
		return
	}
	var ids []string
	for _, m := range n.members {
		ids = append(ids, m.ID)
	}
	if len(ids) == 0 {
		ids = []string{n.opts.ID}
	}
	held := maps.Clone(n.held)
	n.mu.Unlock()

	want := map[string]bool{}
	for _, s := range eng.Config().Sites {
		if Assign(s.Name, ids) == n.opts.ID {
			want[s.Name] = true
		}
	}
	// Release first: stop probing, let no round that planned the site
	// commit any more, delete.
	var release []string
	for site := range held {
		if !want[site] {
			release = append(release, site)
		}
	}
	n.mu.Lock()
	for s := range n.releasing {
		if want[s] {
			delete(n.releasing, s) // wanted again before it was released
		}
	}
	for _, s := range release {
		n.releasing[s] = true
	}
	n.mu.Unlock()
	if len(release) > 0 {
		// The barrier. The site stays held, so a round already committing
		// writes it under its owner key, which A still holds; one still
		// voting that planned it is discarded (the reload picks releasing
		// sites).
		err := n.reloadReleasing(ctx, eng, release)
		if err != nil {
			n.log.Warn("cannot hand sites over yet: the reload before the release failed; retrying", "sites", len(release), "error", err)
			return
		}
		if err := n.release(ctx, release, held); err != nil {
			n.setErr(err)
			return
		}
		n.log.Info("released sites to other members", "sites", len(release))
	}
	names := make([]string, 0, len(want))
	for s := range want {
		if _, ok := held[s]; !ok {
			names = append(names, s)
		}
	}
	sort.Strings(names)
	// The sites held but not owned yet: a reload that failed earlier.
	n.mu.Lock()
	var pending []string
	for s := range n.held {
		if want[s] && !n.owned[s] {
			pending = append(pending, s)
		}
	}
	n.mu.Unlock()
	// Claimed sites are reloaded and probed as they come, not all at the
	// end: at most every refreshEvery while claims go on. A reload reads
	// the sites claimed since the last (LoadSites), but hands them to the
	// engine, which looks over its whole fleet: the claims go on at least
	// twice as long as the last one took, so reloads stay a third of the
	// time.
	every := n.refreshEvery()
	last := time.Now()
	total := 0
	err := n.acquire(ctx, lease, names, func(claimed []string) bool {
		pending = append(pending, claimed...)
		if time.Since(last) < every {
			return true
		}
		began := time.Now()
		ok := n.own(ctx, eng, pending)
		total += len(pending)
		pending, last = nil, time.Now()
		every = max(n.refreshEvery(), 2*last.Sub(began))
		return ok
	})
	if err != nil {
		n.setErr(err)
	}
	if len(pending) > 0 && n.own(ctx, eng, pending) {
		total += len(pending)
	}
	if total > 0 {
		n.log.Info("acquired sites", "sites", total)
	}
	n.metrics.update()
}

// ownersPage is how many owner keys one read returns.
const ownersPage = 10000

// refreshEvery is how often sites claimed in a long run of claims are
// reloaded and handed to the rounds: a cold start of many sites probes
// the first ones while it still claims the rest.
func (n *Node) refreshEvery() time.Duration {
	return min(max(n.ttl/8, 100*time.Millisecond), time.Second)
}

// batchSize is how many guarded operations one transaction carries: what
// etcd takes (max_txn_ops, or less when etcd said so).
func (n *Node) batchSize() int {
	return max(n.opts.Store.MaxTxnOps(), 1)
}

// own reads claimed sites from the store, hands their records to the
// engine (Claim) and marks them owned: only then are they probed, in a
// takeover round at once (engine.Run), or from the instance's next round
// on. It reads those sites only (LoadSites), never the whole store, and
// never waits for a round: the engine takes the records in at once when
// it can, and right after the commit in progress when a round is
// committing, before it plans or acts again. It reports whether the read
// went through.
func (n *Node) own(ctx context.Context, eng *engine.Engine, sites []string) bool {
	// The new owner reloads a site before it probes it.
	n.refreshMu.Lock()
	st, _, err := n.opts.Store.LoadSites(ctx, sites)
	if err == nil {
		// Marked owned once the engine has the records queued (in
		// refreshMu, so in order with the reloads of the others' sites).
		eng.Claim(ctx, st, sites, func() {
			n.mu.Lock()
			for _, s := range sites {
				if _, ok := n.held[s]; ok {
					n.owned[s] = true
				}
			}
			n.mu.Unlock()
		})
	}
	n.refreshMu.Unlock()
	if err != nil {
		n.log.Error("cannot reload acquired sites; not probing them yet", "sites", len(sites), "error", fmt.Errorf("reloading %d sites from the store: %w", len(sites), err))
		return false
	}
	n.metrics.update()
	return true
}

// reloadSites reloads the named sites, and only them, from the store:
// LoadSites reads their records, which the engine takes over what it
// holds. Called with refreshMu held.
func (n *Node) reloadSites(ctx context.Context, eng *engine.Engine, sites []string) error {
	st, _, err := n.opts.Store.LoadSites(ctx, sites)
	if err != nil {
		return fmt.Errorf("reloading %d sites from the store: %w", len(sites), err)
	}
	set := make(map[string]bool, len(sites))
	for _, s := range sites {
		set[s] = true
	}
	if err := eng.RefreshLoaded(ctx, st, func(site string) bool { return set[site] }); err != nil {
		return err
	}
	return nil
}

// reloadReleasing is the handover's barrier: it reloads the sites being
// released (marked releasing, so no longer probed), and only them. The
// engine discards a round in progress that planned one of them, and the
// reload waits for a round that is committing, so no round of this
// instance writes them after the release.
func (n *Node) reloadReleasing(ctx context.Context, eng *engine.Engine, release []string) error {
	n.refreshMu.Lock()
	defer n.refreshMu.Unlock()
	return n.reloadSites(ctx, eng, release)
}

// taken returns the sites whose owner key exists: one paged read
// of the owner keys at one revision, keys only.
func (n *Node) taken(ctx context.Context) (map[string]bool, error) {
	prefix := n.key("owners") + "/"
	end := clientv3.GetPrefixRangeEnd(prefix)
	out := map[string]bool{}
	from := prefix
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(ownersPage),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := n.cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, fmt.Errorf("reading the owner keys under %s: %w", prefix, err)
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			out[strings.TrimPrefix(string(kv.Key), prefix)] = true
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// acquire claims the owner keys of names that no one holds, up to
// batchSize guarded puts a transaction: each put needs its key absent
// (create revision 0), so the transaction claims all of its sites or
// none. One that fails says, in its else branch, which keys exist now;
// the free ones are claimed again. A site held by another member is left
// alone: its release (a watched delete) wakes the reconcile again.
// claimed runs after each transaction that claimed sites; it returns
// false to stop.
func (n *Node) acquire(ctx context.Context, lease clientv3.LeaseID, names []string, claimed func([]string) bool) error {
	if len(names) == 0 {
		return nil
	}
	taken, err := n.taken(ctx)
	if err != nil {
		return err
	}
	free := make([]string, 0, len(names))
	for _, s := range names {
		if !taken[s] {
			free = append(free, s)
		}
	}
	size := n.batchSize()
	for tries := 0; len(free) > 0; {
		chunk := free[:min(size, len(free))]
		cmps := make([]clientv3.Cmp, len(chunk))
		puts := make([]clientv3.Op, len(chunk))
		gets := make([]clientv3.Op, len(chunk))
		for i, s := range chunk {
			k := n.key("owners", s)
			cmps[i] = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
			puts[i] = clientv3.OpPut(k, n.opts.ID, clientv3.WithLease(lease))
			gets[i] = clientv3.OpGet(k, clientv3.WithKeysOnly())
		}
		resp, err := n.cli.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
		if err != nil {
			return fmt.Errorf("claiming %d sites (%s...): %w", len(chunk), chunk[0], err)
		}
		if !resp.Succeeded {
			// Some were claimed by another member meanwhile: keep the rest.
			var still []string
			for i, r := range resp.Responses {
				if rr := r.GetResponseRange(); rr != nil && len(rr.Kvs) == 0 {
					still = append(still, chunk[i])
				}
			}
			if len(still) == len(chunk) {
				if tries++; tries > 3 {
					return fmt.Errorf("claiming %d sites (%s...): the claim kept failing though their keys are free", len(chunk), chunk[0])
				}
			}
			free = append(still, free[len(chunk):]...)
			continue
		}
		tries = 0
		free = free[len(chunk):]
		// Every key of the transaction was created at its revision.
		n.mu.Lock()
		for _, s := range chunk {
			n.held[s] = resp.Header.Revision
		}
		n.mu.Unlock()
		if !claimed(chunk) {
			return nil
		}
	}
	return nil
}

// release deletes the owner keys of sites, each only if it still has the
// create revision held says (the key of this node's claim), up to
// batchSize a transaction. A transaction that fails (a key already gone
// with an expired lease) is done again one site at a time.
func (n *Node) release(ctx context.Context, sites []string, held map[string]int64) error {
	size := n.batchSize()
	forget := func(done []string) {
		n.mu.Lock()
		for _, s := range done {
			delete(n.held, s)
			delete(n.owned, s)
			delete(n.releasing, s)
		}
		n.mu.Unlock()
	}
	for len(sites) > 0 {
		chunk := sites[:min(size, len(sites))]
		sites = sites[len(chunk):]
		cmps := make([]clientv3.Cmp, len(chunk))
		dels := make([]clientv3.Op, len(chunk))
		for i, s := range chunk {
			k := n.key("owners", s)
			cmps[i] = clientv3.Compare(clientv3.CreateRevision(k), "=", held[s])
			dels[i] = clientv3.OpDelete(k)
		}
		resp, err := n.cli.Txn(ctx).If(cmps...).Then(dels...).Commit()
		if err != nil {
			return fmt.Errorf("releasing %d sites (%s...): %w", len(chunk), chunk[0], err)
		}
		if !resp.Succeeded {
			for _, s := range chunk {
				k := n.key("owners", s)
				if _, err := n.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", held[s])).
					Then(clientv3.OpDelete(k)).Commit(); err != nil {
					return fmt.Errorf("releasing site %s: %w", s, err)
				}
			}
		}
		forget(chunk)
	}
	return nil
}
