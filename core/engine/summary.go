package engine

import (
	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
)

// Summary is the fleet in a few numbers (GET /v1/summary): the sites by
// status, those off their top level, those with every level unhealthy,
// and those waiting for an operator's failback (off the top level, the
// top level healthy again, the failback manual by configuration or by a
// manual hold). One pass over the views, no site view built.
func (v *Views) Summary() api.FleetSummary {
	out := api.FleetSummary{Round: v.Round, Sites: len(v.sites), Counts: make(map[string]int, len(Statuses))}
	for _, st := range Statuses {
		out.Counts[st] = 0
	}
	for i, snap := range v.sites {
		out.Counts[v.Status(i)]++
		spec := v.fleet.Sites[i].Spec
		all := len(snap.levels) > 0
		for _, l := range snap.levels {
			all = all && l == decide.Unhealthy
		}
		if all {
			out.AllUnhealthy++
		}
		top := spec.TopLevel()
		if snap.level == top {
			continue
		}
		out.OffTopLevel++
		manual := decide.EffectiveFailback(spec, &decide.SiteState{ManualHold: snap.hold}) == decide.FailbackManual
		if ti := spec.LevelIndex(top); manual && ti >= 0 && snap.levels[ti] == decide.Healthy {
			out.FailbackWaiting++
		}
	}
	return out
}
