package readmodel

import (
	"sort"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/sdk"
)

// SourceReport is one vote source's answer about itself
// (sdk.StatusReporter): its Status, or the error it gave instead.
type SourceReport struct {
	Source string
	Status sdk.Status
	Err    error
}

// SourceStatuses shapes the sources' reports for GET /v1/nodes, in the
// order given: each source's items (its nodes) sorted by id, with empty
// labels as {} and an unknown last-seen time as null; a source that
// failed shows its error and no items.
func SourceStatuses(reports []SourceReport) []api.SourceStatus {
	var out []api.SourceStatus
	for _, r := range reports {
		s := api.SourceStatus{Source: r.Source}
		if r.Err != nil {
			s.Error = r.Err.Error()
			out = append(out, s)
			continue
		}
		s.Summary = r.Status.Summary
		for _, it := range r.Status.Items {
			nv := api.NodeView{ID: it.Name, Source: r.Source, State: it.State, Labels: it.Labels, Detail: it.Detail}
			if nv.Labels == nil {
				nv.Labels = map[string]string{}
			}
			if !it.LastSeen.IsZero() {
				t := it.LastSeen
				nv.LastSeen = &t
			}
			s.Items = append(s.Items, nv)
		}
		sort.Slice(s.Items, func(a, b int) bool { return s.Items[a].ID < s.Items[b].ID })
		out = append(out, s)
	}
	return out
}
