package engine

import (
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
)

// rampEvents adds a site's ramp_step event to its round's events when
// its failback ramp moved in the round: a ramp that started or took a
// step (its weight now), or one that ended at 100 without a switch (the
// recovering level took all new requests). A ramp aborted by a failover
// says so in its level_switched event and gets none. The previous ramp
// is the one of the views swapped in at the last commit. The decision
// core's own events are left as they are, so that a replay of the
// rules' events (vigil simulate, the conformance scenarios) does not
// change. Called with e.mu held.
func (e *Engine) rampEvents(s *fleet.Site, events []decide.Event) []decide.Event {
	af := s.Spec.AntiFlap
	if af == nil || af.Ramp == nil {
		return events
	}
	var prev *rampSnap
	prevLevel := 0
	if v := e.views.Load(); v != nil {
		if j := v.Index(s.Spec.Name); j >= 0 && j < len(v.sites) && v.sites[j] != nil {
			prev, prevLevel = v.sites[j].ramp, v.sites[j].level
		}
	}
	now := rampSnapOf(s)
	var ev decide.Event
	switch {
	case now != nil && (prev == nil || prev.weight != now.weight || prev.from != now.from || prevLevel != s.State.Level):
		ev = decide.Event{Kind: decide.KindRampStep, Level: s.State.Level, FromLevel: now.from, Weight: now.weight}
	case now == nil && prev != nil && prevLevel == s.State.Level && !switched(events):
		ev = decide.Event{Kind: decide.KindRampStep, Level: s.State.Level, FromLevel: prev.from, Weight: 100}
	default:
		return events
	}
	return append(append(make([]decide.Event, 0, len(events)+1), events...), ev)
}

// switched reports whether the events switch the site's level.
func switched(events []decide.Event) bool {
	for _, ev := range events {
		if ev.Kind == decide.KindLevelSwitched {
			return true
		}
	}
	return false
}
