package node

import (
	"context"
	"fmt"
	"time"

	"github.com/vigilcdn/vigil/sdk"
)

// Status implements sdk.StatusReporter: the nodes, so that `vigil status`,
// GET /v1/nodes and the status page can show which nodes are online. A node
// that went offline stays listed, State "offline" with its last-seen time
// and a Detail saying why and since when, until it is forgotten after
// forget_after (or pushed out by MaxOfflineNodes newer offline nodes). The
// summary also counts the streams refused since the gateway started, by
// reason (Refusals), and the heartbeats dropped over the rate.
func (s *Source) Status(context.Context) (sdk.Status, error) {
	nodes := s.Nodes()
	st := sdk.Status{Items: make([]sdk.StatusItem, len(nodes))}
	online := 0
	for i, n := range nodes {
		if n.Online {
			online++
		}
		st.Items[i] = sdk.StatusItem{Name: n.ID, State: n.State, Labels: n.Labels, LastSeen: n.LastSeen, Detail: detail(n)}
	}
	st.Summary = fmt.Sprintf("%d of %d nodes online", online, len(nodes))
	if refused := s.Refusals(); len(refused) > 0 {
		st.Summary += "; refused since start: " + counts(refused)
	}
	if n := s.guard.dropped.Load(); n > 0 {
		st.Summary += fmt.Sprintf("; %d heartbeats dropped over the rate", n)
	}
	return st, nil
}

// detail is a node's Detail line: for an offline node why and since when
// first, then what it is.
func detail(n NodeStatus) string {
	what := fmt.Sprintf("agent %s from %s, attached since %s", n.AgentVersion, n.Remote, stamp(n.Since))
	if n.HeartbeatsDropped > 0 {
		what += fmt.Sprintf("; %d heartbeats dropped over its limit", n.HeartbeatsDropped)
	}
	if n.Online {
		return what
	}
	why := n.OfflineReason
	if n.OfflineDetail != "" && n.OfflineDetail != why {
		why += " (" + n.OfflineDetail + ")"
	}
	return fmt.Sprintf("offline since %s: %s; last seen %s; %s", stamp(n.OfflineSince), why, stamp(n.LastSeen), what)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }
