package node

import (
	"context"
	"fmt"

	"github.com/vigilcdn/vigil/sdk"
)

// Status implements sdk.StatusReporter: the attached nodes, so that
// `vigil status`, GET /v1/nodes and the status page can show which nodes
// are online.
func (s *Source) Status(context.Context) (sdk.Status, error) {
	nodes := s.Nodes()
	st := sdk.Status{Items: make([]sdk.StatusItem, len(nodes))}
	online := 0
	for i, n := range nodes {
		state := "offline"
		if n.Online {
			state = "online"
			online++
		}
		st.Items[i] = sdk.StatusItem{
			Name: n.ID, State: state, Labels: n.Labels, LastSeen: n.LastSeen,
			Detail: fmt.Sprintf("agent %s from %s, attached since %s", n.AgentVersion, n.Remote, n.Since.UTC().Format("2006-01-02T15:04:05Z")),
		}
	}
	st.Summary = fmt.Sprintf("%d of %d nodes online", online, len(nodes))
	return st, nil
}
