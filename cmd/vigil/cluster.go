package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/ha"
)

// writeClusterLine prints this instance's place in the cluster above the
// status cards; nothing for an agent without a cluster (bbolt store).
func writeClusterLine(ctx context.Context, c *api.Client, w io.Writer) {
	info, err := c.Cluster(ctx)
	if err != nil {
		return
	}
	fmt.Fprintf(w, "%s\n\n", clusterLine(*info))
}

// clusterLine words GET /v1/cluster as the instance knows it: the leader
// only when etcd confirmed it, else the last leader seen and how long ago,
// and "no quorum" while etcd does not answer this instance.
func clusterLine(info api.ClusterInfo) string {
	var ids []string
	for _, m := range info.Members {
		ids = append(ids, m.ID)
	}
	acting := "acting"
	if !info.Acting {
		acting = "not acting"
	}
	var leader string
	switch {
	case info.State == "":
		// An agent older than the state, quorum and leader_confirmed fields.
		leader = "leader none elected"
		if info.Leader != nil {
			leader = fmt.Sprintf("leader %s (%s)", info.Leader.ID, info.Leader.URL)
		}
	case !info.Quorum:
		leader = "no quorum: etcd has not answered this instance yet"
		if info.EtcdSeenAt != nil {
			leader = "no quorum since " + ha.Ago(info.EtcdAge())
		}
		if info.Leader != nil {
			leader += fmt.Sprintf("; last leader seen: %s (%s) %s ago", info.Leader.ID, info.Leader.URL, ha.Ago(info.LeaderAge()))
		} else {
			leader += "; no leader seen"
		}
	case info.Leader != nil && info.LeaderConfirmed:
		leader = fmt.Sprintf("leader %s (%s)", info.Leader.ID, info.Leader.URL)
	case info.Leader != nil:
		leader = fmt.Sprintf("%s: leader not confirmed; last leader seen: %s (%s) %s ago", info.State, info.Leader.ID, info.Leader.URL, ha.Ago(info.LeaderAge()))
	default:
		leader = "leader none elected"
	}
	list := strings.Join(ids, ", ")
	if len(ids) == 0 {
		list = "none"
	}
	members := "members " + list
	if info.State != "" && !info.Quorum {
		members = "members last seen " + list
	}
	return fmt.Sprintf("cluster %s: this instance %s is %s (%s), owns %d site(s); %s; %s; etcd %s",
		info.Mode, info.ID, info.Role, acting, info.OwnedSites, leader, members, info.Etcd)
}
