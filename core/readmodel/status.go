package readmodel

import (
	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
)

// Status returns the one-word status of the site at position i (one of
// api.Statuses) without building its view. A pass over many sites fills
// one SiteState again and again and asks its Status instead.
func Status(s Snapshot, i int) string {
	var st SiteState
	s.State(i, &st)
	return st.Status()
}

// Status sums the site up in one word, worst first: down (the current
// level is unhealthy), failed over, degraded (an origin unhealthy), paused
// (no health check, or fewer than two enabled origins), unknown (the
// current level not judged yet), ok.
func (s *SiteState) Status() string {
	spec := s.Spec
	enabled := 0
	unhealthy := false
	for _, o := range s.Origins {
		if o.State != decide.Disabled {
			enabled++
		}
		unhealthy = unhealthy || o.State == decide.Unhealthy
	}
	cur := spec.LevelIndex(s.Level)
	switch {
	case cur >= 0 && s.Levels[cur] == decide.Unhealthy:
		return api.StatusDown
	case s.Level != spec.TopLevel():
		return api.StatusFailedOver
	case unhealthy:
		return api.StatusDegraded
	case !spec.HealthCheck || enabled < 2:
		return api.StatusPaused
	case cur >= 0 && s.Levels[cur] == decide.Unknown:
		return api.StatusUnknown
	}
	return api.StatusOK
}
