package readmodel

import (
	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
)

// Summary is the fleet in a few numbers (GET /v1/summary): the sites by
// status, those off their top level, those with every level unhealthy,
// and those waiting for an operator's failback (a level above the current
// one healthy again, the failback manual by configuration or by a manual
// hold: what the Alertmanager's VigilFailbackAvailable says too). One pass
// over the snapshot, no site view built.
func Summary(s Snapshot) api.FleetSummary {
	round, _ := s.Commit()
	out := api.FleetSummary{Round: round, Sites: s.Len(), Counts: make(map[string]int, len(api.Statuses))}
	for _, st := range api.Statuses {
		out.Counts[st] = 0
	}
	var site SiteState
	for i := range s.Len() {
		s.State(i, &site)
		out.Counts[site.Status()]++
		if allUnhealthy(site.Levels) {
			out.AllUnhealthy++
		}
		if site.Level == site.Spec.TopLevel() {
			continue
		}
		out.OffTopLevel++
		if failbackWaiting(&site) != 0 {
			out.FailbackWaiting++
		}
	}
	return out
}

// allUnhealthy reports whether every level is unhealthy.
func allUnhealthy(levels []decide.Health) bool {
	for _, h := range levels {
		if h != decide.Unhealthy {
			return false
		}
	}
	return len(levels) > 0
}

// failbackWaiting is the healthy level above the current one that a
// manual failback (configured, or a manual hold) waits for an operator to
// switch to, as the failback_available notice says; 0 for none.
func failbackWaiting(s *SiteState) int {
	spec := s.Spec
	if decide.EffectiveFailback(spec, &decide.SiteState{ManualHold: s.ManualHold}) != decide.FailbackManual {
		return 0
	}
	cur := spec.LevelIndex(s.Level)
	for li := 0; li < cur && li < len(s.Levels); li++ {
		if s.Levels[li] == decide.Healthy {
			return spec.Levels[li]
		}
	}
	return 0
}
