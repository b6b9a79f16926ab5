package ha

import (
	"context"
	"maps"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ownership (sharded) keeps this node's share: each site goes to the live
// member of highest rendezvous weight. Handover of a site from A to B:
//
//  1. B sees the new member list and wants the site; A sees it too and
//     no longer wants it.
//  2. A stops probing it (Owns turns false) but may still write it, then
//     reloads the sites it does not own, this one included: the engine
//     discards a round that planned it and is still asking its sources,
//     and the reload waits for one that is committing, so no round that
//     planned the site commits it after this (Apply also skips a site
//     Owns no longer accepts).
//     A then deletes P/owners/SITE if it still has the revision A created.
//  3. B creates P/owners/SITE with its lease only if the key does not
//     exist (create revision 0), reloads the site from etcd, and only then
//     probes it.
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
		n.refreshMu.Lock()
		err := n.reloadUnowned(ctx, eng)
		n.refreshMu.Unlock()
		if err != nil {
			n.log.Warn("cannot hand sites over yet: the reload before the release failed; retrying", "sites", len(release), "error", err)
			return
		}
		for _, s := range release {
			_, err := n.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(n.key("owners", s)), "=", held[s])).
				Then(clientv3.OpDelete(n.key("owners", s))).Commit()
			if err != nil {
				n.setErr(err)
				return
			}
			n.mu.Lock()
			delete(n.held, s)
			delete(n.owned, s)
			delete(n.releasing, s)
			n.mu.Unlock()
		}
		n.log.Info("released sites to other members", "sites", len(release))
	}
	var acquired []string
	names := make([]string, 0, len(want))
	for s := range want {
		if _, ok := held[s]; !ok {
			names = append(names, s)
		}
	}
	sort.Strings(names)
	for _, s := range names {
		k := n.key("owners", s)
		resp, err := n.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, n.opts.ID, clientv3.WithLease(lease))).Commit()
		if err != nil {
			n.setErr(err)
			break
		}
		if !resp.Succeeded {
			continue // still held by its previous owner: retried on its release
		}
		n.mu.Lock()
		n.held[s] = resp.Header.Revision
		n.mu.Unlock()
		acquired = append(acquired, s)
	}
	n.mu.Lock()
	for s := range n.held {
		if want[s] && !n.owned[s] && !contains(acquired, s) {
			acquired = append(acquired, s) // a reload that failed earlier
		}
	}
	n.mu.Unlock()
	if len(acquired) > 0 {
		set := map[string]bool{}
		for _, s := range acquired {
			set[s] = true
		}
		// The new owner reloads a site before it probes it.
		n.refreshMu.Lock()
		err := eng.RefreshSites(ctx, func(site string) bool { return set[site] })
		n.refreshMu.Unlock()
		if err != nil {
			n.log.Error("cannot reload acquired sites; not probing them yet", "error", err)
			return
		}
		n.mu.Lock()
		for _, s := range acquired {
			n.owned[s] = true
		}
		n.mu.Unlock()
		n.log.Info("acquired sites", "sites", len(acquired))
	}
	n.metrics.update()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
