// Package ha runs several vigil agents over one etcd: leader election with
// a lease (active/standby), membership and site ownership by rendezvous
// hashing (sharded), the fence that guards every state write
// (etcdstore.Fence), the watch that keeps standbys' views and publication
// current, and the cluster's status (GET /v1/cluster, metrics).
//
// A node is in one term at a time: one etcd lease, kept alive by this
// process, carrying its membership key, its election key and (sharded) its
// site owner keys. When the lease is lost (it expired, etcd cannot be
// reached for lease_ttl, or the process was paused) the node stops acting
// at once, before etcd can hand its role to another instance, and starts a
// new term with a new lease. Until then it is "detached" (Info): it claims
// no role, and shows the last leader seen as not confirmed, with its age.
//
// What the node knows of the cluster is dated: when etcd last answered it
// (a quorum is seen while that is within lease_ttl) and when etcd last
// confirmed the leader (a linearizable read of the election's first key,
// at least every lease_ttl/4 and on each change of the election).
//
// An active node (the leader, or a shard) also compacts etcd's history
// every compaction_interval when its turn comes (etcdstore.Compactor): one
// instance of the cluster an interval, to a revision one interval old.
package ha
