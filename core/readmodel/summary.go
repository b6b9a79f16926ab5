package readmodel

import (
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
)

// Scheduler is what a Snapshot may also say of the scheduler, for the
// summary's cycle: sites_per_round, round_interval, and the filter of a
// sharded instance's share (nil: every site).
type Scheduler interface {
	Schedule() (perRound int, interval time.Duration, owns func(site string) bool)
}

// AutoScheduler is what a Scheduler may also say when sites_per_round is
// "auto": that it is, and the size of the last round (0 before the first).
type AutoScheduler interface {
	ScheduleAuto() (auto bool, lastSize int)
}

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
	sched, _ := s.(Scheduler)
	var owns func(string) bool
	if sched != nil {
		_, _, owns = sched.Schedule()
	}
	probed := 0
	var site SiteState
	for i := range s.Len() {
		s.State(i, &site)
		out.Counts[site.Status()]++
		if eligible(&site) && (owns == nil || owns(site.Spec.Name)) {
			probed++
		}
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
	if sched != nil {
		perRound, interval, _ := sched.Schedule()
		out.CycleSeconds = Cycle(probed, perRound, interval).Seconds()
		if as, ok := sched.(AutoScheduler); ok {
			auto, size := as.ScheduleAuto()
			out.RoundSitesAuto = auto
			if auto {
				out.RoundSites = size
			}
		}
	}
	return out
}

// Cycle is how long the scheduler takes to probe sites sites once at
// perRound a round: ceil(sites / perRound) rounds of interval, one round
// at least (0 when perRound is not positive).
func Cycle(sites, perRound int, interval time.Duration) time.Duration {
	if perRound <= 0 {
		return 0
	}
	return time.Duration(max(1, (sites+perRound-1)/perRound)) * interval
}

// eligible is the scheduler's rule (fleet.Site.Eligible): health check on
// and at least two enabled origins.
func eligible(s *SiteState) bool {
	if !s.Spec.HealthCheck {
		return false
	}
	n := 0
	for _, o := range s.Origins {
		if o.State != decide.Disabled {
			n++
		}
	}
	return n >= 2
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
