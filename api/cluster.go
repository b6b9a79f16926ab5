package api

import "time"

// Roles of an instance: what it can prove it is now.
const (
	// RoleLeader runs the rounds and takes the actions (active/standby).
	RoleLeader = "leader"
	// RoleStandby holds a valid lease but not the leadership: it mirrors
	// the state and refuses changes.
	RoleStandby = "standby"
	// RoleShard holds a valid lease in sharded mode and acts on the sites
	// it owns.
	RoleShard = "shard"
	// RoleDetached holds no valid lease: etcd has not renewed it within
	// lease_ttl (no quorum, or this instance is cut off or was paused), or
	// a new term is starting. A detached instance acts on nothing and
	// cannot tell whether another instance leads: it shows the last
	// leader it saw, not confirmed.
	RoleDetached = "detached"
)

// States of an instance, ClusterInfo.State: what it knows of the cluster now.
const (
	// StateActing: this instance holds a valid lease and acts (the leader,
	// or a shard).
	StateActing = "acting"
	// StateStandby: etcd answers, and it confirmed another instance as the
	// leader within lease_ttl.
	StateStandby = "standby"
	// StateTakingOver: this instance was just elected and reloads the
	// state before it acts.
	StateTakingOver = "taking over"
	// StateNoLeader: etcd answers but names no leader that acts (none is
	// elected, or the key of an ended term of this instance has not
	// expired yet).
	StateNoLeader = "no leader"
	// StateJoining: etcd answers but this instance holds no lease yet (a
	// new term is starting).
	StateJoining = "joining"
	// StateNoQuorum: etcd has not answered this instance within lease_ttl
	// (no quorum, or this instance is cut off from it): nothing it knows of
	// the cluster is confirmed.
	StateNoQuorum = "no quorum"
)

// Info is GET /v1/cluster.

// Member is one live instance of the cluster.
type Member struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

// ClusterInfo is GET /v1/cluster: an instance's place in a cluster that
// shares an etcd store (core/ha).
type ClusterInfo struct {
	ID   string `json:"id"`
	URL  string `json:"url"`
	Mode string `json:"mode"`
	// Role is what this instance can prove it is: "leader", "standby",
	// "shard", or "detached" when its lease is not valid (see the Role*
	// constants). An instance whose lease is not valid is never "leader".
	Role string `json:"role"`
	// Acting is whether this instance runs rounds and accepts actions now.
	Acting bool `json:"acting"`
	// State sums up what this instance knows, in words: "acting",
	// "standby", "taking over", "no leader", "joining" or "no quorum" (see
	// the State* constants).
	State string `json:"state"`
	// Quorum is whether etcd answered this instance within lease_ttl.
	Quorum bool `json:"quorum"`
	// EtcdSeenAt is when etcd last answered this instance (a request sent
	// then was answered); nil before the first answer.
	EtcdSeenAt *time.Time `json:"etcd_seen_at,omitempty"`
	// Leader runs the rounds (active/standby) and delivers notifications:
	// the leader etcd last named to this instance, nil when it named none.
	// Unless LeaderConfirmed, it is only the last leader seen.
	Leader *Member `json:"leader"`
	// LeaderConfirmed is whether etcd confirmed Leader within lease_ttl
	// (and, when Leader is this instance, that it holds the leadership of
	// its current term).
	LeaderConfirmed bool `json:"leader_confirmed"`
	// LeaderSeenAt is when etcd last confirmed Leader.
	LeaderSeenAt *time.Time `json:"leader_seen_at,omitempty"`
	// Members are the live instances, as etcd last listed them.
	Members    []Member `json:"members"`
	OwnedSites int      `json:"owned_sites"`
	// Owned lists the owned sites when sharded.
	Owned []string `json:"owned,omitempty"`
	// Etcd is "ok" or why this instance cannot use etcd.
	Etcd string `json:"etcd"`
	// AsOf is this instance's clock when it answered: the ages of
	// EtcdSeenAt and LeaderSeenAt are AsOf minus them, free of any clock
	// difference with the reader.
	AsOf time.Time `json:"as_of"`
}

// LeaderAge is how long ago etcd last confirmed Leader (0 when unknown).
func (i ClusterInfo) LeaderAge() time.Duration { return age(i.AsOf, i.LeaderSeenAt) }

// EtcdAge is how long ago etcd last answered this instance (0 when it
// never did).
func (i ClusterInfo) EtcdAge() time.Duration { return age(i.AsOf, i.EtcdSeenAt) }

func age(now time.Time, t *time.Time) time.Duration {
	if t == nil || now.IsZero() {
		return 0
	}
	return max(now.Sub(*t), 0)
}
