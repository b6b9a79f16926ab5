package ha

import (
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fence is the node's etcdstore.Fence: the comparisons of the current
// term, so that a write made after the term ended fails in etcd itself.
//
// Active/standby: every write needs the leader key of this term to exist
// with the create revision it had when this node was elected (a key with
// the same name re-created later has another revision).
//
// Sharded: a site's write needs its owner key with the revision this node
// created it at; the counters and the journal need this node's member key
// of this term; delivery cursors need the leader key (the leader delivers
// notifications).
type fence struct{ n *Node }

func (f fence) leaderCmp() ([]clientv3.Cmp, bool) {
	n := f.n
	if !n.leading || n.leaderKey == "" || !n.leaseValid() {
		return nil, false
	}
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(n.leaderKey), "=", n.leaderRev)}, true
}

func (f fence) Writer() ([]clientv3.Cmp, bool) {
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.sharded {
		if !n.ready {
			return nil, false
		}
		return f.leaderCmp()
	}
	if !n.leaseValid() {
		return nil, false
	}
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(n.key("members", n.opts.ID)), "=", n.memberRev)}, true
}

func (f fence) Site(name string) ([]clientv3.Cmp, bool) {
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.sharded {
		return nil, true // the Writer comparison covers every site
	}
	rev, ok := n.held[name]
	if !ok || !n.owned[name] {
		return nil, false
	}
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(n.key("owners", name)), "=", rev)}, true
}

func (f fence) Notifier() ([]clientv3.Cmp, bool) {
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	return f.leaderCmp()
}
