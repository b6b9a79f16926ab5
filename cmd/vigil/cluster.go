package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/vigilcdn/vigil/core/ha"
)

// writeClusterLine prints this instance's place in the cluster above the
// status cards; nothing for an agent without a cluster (bbolt store).
func writeClusterLine(ctx context.Context, c *client, w io.Writer) {
	var info ha.Info
	if err := c.do(ctx, "GET", "/v1/cluster", nil, &info); err != nil {
		return
	}
	leader := "none elected"
	if info.Leader != nil {
		leader = fmt.Sprintf("%s (%s)", info.Leader.ID, info.Leader.URL)
	}
	var ids []string
	for _, m := range info.Members {
		ids = append(ids, m.ID)
	}
	state := "acting"
	if !info.Acting {
		state = "not acting"
	}
	fmt.Fprintf(w, "cluster %s: this instance %s is %s (%s), owns %d site(s); leader %s; members %s; etcd %s\n\n",
		info.Mode, info.ID, info.Role, state, info.OwnedSites, leader, strings.Join(ids, ", "), info.Etcd)
}
