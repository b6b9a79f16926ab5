package engine

import (
	"github.com/vigilcdn/vigil/api"
)

// Summary is the fleet in a few numbers (GET /v1/summary): the sites by
// status, those off their top level, those with every level unhealthy,
// and those waiting for an operator's failback (a level above the current
// one healthy again, the failback manual by configuration or by a manual
// hold: what the Alertmanager's VigilFailbackAvailable says too). One pass over the views, no site view built.
func (v *Views) Summary() api.FleetSummary {
	out := api.FleetSummary{Round: v.Round, Sites: len(v.sites), Counts: make(map[string]int, len(Statuses))}
	for _, st := range Statuses {
		out.Counts[st] = 0
	}
	for i, snap := range v.sites {
		out.Counts[v.Status(i)]++
		spec := v.fleet.Sites[i].Spec
		if snap.allUnhealthy() {
			out.AllUnhealthy++
		}
		if snap.level == spec.TopLevel() {
			continue
		}
		out.OffTopLevel++
		if snap.failbackWaiting(spec) != 0 {
			out.FailbackWaiting++
		}
	}
	return out
}
