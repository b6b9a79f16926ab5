package engine

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/vigilcdn/vigil/sdk"
)

// SourceStatus is what one source reports about itself
// (sdk.StatusReporter), such as the node gateway's nodes.
type SourceStatus struct {
	Source  string     `json:"source"`
	Summary string     `json:"summary,omitempty"`
	Error   string     `json:"error,omitempty"`
	Items   []NodeView `json:"-"`
}

// NodeView is one item of a source's status, such as a node.
type NodeView struct {
	ID       string            `json:"id"`
	Source   string            `json:"source"`
	State    string            `json:"state"`
	Labels   map[string]string `json:"labels"`
	Detail   string            `json:"detail,omitempty"`
	LastSeen *time.Time        `json:"last_seen"`
}

type statusReporter interface {
	Status(ctx context.Context) (sdk.Status, error)
}

// SourceStatuses asks every source that reports a status, concurrently and
// without waiting for a round in progress. Sources with no status are left
// out.
func (e *Engine) SourceStatuses(ctx context.Context) []SourceStatus {
	e.statsMu.Lock()
	sources := e.liveSources
	e.statsMu.Unlock()
	out := make([]SourceStatus, len(sources))
	has := make([]bool, len(sources))
	done := make(chan int, len(sources))
	for i, src := range sources {
		r, ok := src.(statusReporter)
		if !ok {
			done <- i
			continue
		}
		go func(i int, name string) {
			defer func() { done <- i }()
			st, err := r.Status(ctx)
			if errors.Is(err, sdk.ErrNoStatus) {
				return
			}
			has[i] = true
			out[i] = SourceStatus{Source: name}
			if err != nil {
				out[i].Error = err.Error()
				return
			}
			out[i].Summary = st.Summary
			for _, it := range st.Items {
				nv := NodeView{ID: it.Name, Source: name, State: it.State, Labels: it.Labels, Detail: it.Detail}
				if nv.Labels == nil {
					nv.Labels = map[string]string{}
				}
				if !it.LastSeen.IsZero() {
					t := it.LastSeen
					nv.LastSeen = &t
				}
				out[i].Items = append(out[i].Items, nv)
			}
			sort.Slice(out[i].Items, func(a, b int) bool { return out[i].Items[a].ID < out[i].Items[b].ID })
		}(i, src.Name())
	}
	for range sources {
		<-done
	}
	var res []SourceStatus
	for i := range out {
		if has[i] {
			res = append(res, out[i])
		}
	}
	return res
}
