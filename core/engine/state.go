package engine

import (
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/core/vote"
)

// originExtra is what the engine keeps per origin beside the core's state.
type originExtra struct {
	since      time.Time
	reason     string
	disabledBy string // "config", "operator" or ""
	votes      []VoteView
}

// siteExtra is what the engine keeps per site beside the core's state.
type siteExtra struct {
	lastProbedAt time.Time
	lastRound    uint64
	lastEvents   []decide.Event
	origins      map[string]*originExtra
}

func newSiteExtra() *siteExtra { return &siteExtra{origins: map[string]*originExtra{}} }

func (x *siteExtra) origin(name string) *originExtra {
	o := x.origins[name]
	if o == nil {
		o = &originExtra{}
		x.origins[name] = o
	}
	return o
}

// record is the store's form of a site.
func record(s *fleet.Site, x *siteExtra) store.Site {
	r := store.Site{
		Name:         s.Spec.Name,
		Level:        s.State.Level,
		ManualHold:   s.State.ManualHold,
		Alerted:      s.State.Alerted,
		LastProbed:   s.LastProbed,
		LastProbedAt: x.lastProbedAt,
		Origins:      make(map[string]store.Origin, len(s.Spec.Origins)),
	}
	if s.State.Baseline != nil {
		r.Baseline = make(map[int]string, len(s.Spec.Levels))
		for i, l := range s.Spec.Levels {
			r.Baseline[l] = s.State.Baseline[i].String()
		}
	}
	for i, o := range s.Spec.Origins {
		st := s.State.Origins[i]
		ox := x.origin(o.Name)
		out := s.Outcomes[i]
		ro := store.Origin{
			State: st.State.String(), Failures: st.Failures, Successes: st.Successes,
			Reason: ox.reason, Since: ox.since, DisabledBy: ox.disabledBy,
		}
		if st.State != decide.Disabled && x.lastRound != 0 {
			ro.Verdict = out.Verdict.String()
		}
		r.Origins[o.Name] = ro
	}
	return r
}

// restore applies a stored record to a freshly built site, following the
// configuration where the two disagree: new origins start unknown, removed
// ones are dropped, an origin the configuration disables is disabled, one
// the operator disabled stays disabled, and a current level that no longer
// exists moves the site to its top level with an event.
func restore(s *fleet.Site, x *siteExtra, r store.Site, configEnabled []bool, now time.Time) []decide.Event {
	var events []decide.Event
	st := s.State
	st.ManualHold, st.Alerted = r.ManualHold, r.Alerted
	s.LastProbed = r.LastProbed
	x.lastProbedAt = r.LastProbedAt
	x.lastRound = r.LastProbed
	if s.Spec.LevelIndex(r.Level) >= 0 {
		st.Level = r.Level
	} else if r.Level != 0 {
		st.Level = s.Spec.TopLevel()
		st.ManualHold = false
		events = append(events, decide.Event{Kind: decide.KindLevelSwitched, FromLevel: r.Level, ToLevel: st.Level, Reason: decide.ReasonConfig})
	}
	if r.Baseline != nil {
		st.Baseline = make([]decide.Health, len(s.Spec.Levels))
		for i, l := range s.Spec.Levels {
			if h, err := decide.ParseHealth(r.Baseline[l]); err == nil {
				st.Baseline[i] = h
			}
		}
	}
	for i, o := range s.Spec.Origins {
		ox := x.origin(o.Name)
		ro, ok := r.Origins[o.Name]
		if !configEnabled[i] {
			st.Origins[i] = decide.OriginState{State: decide.Disabled}
			ox.disabledBy = "config"
			if ok && ro.State == "disabled" {
				ox.since = ro.Since
			} else {
				ox.since = now
			}
			continue
		}
		if !ok { // a new origin: unknown
			ox.since = now
			continue
		}
		h, err := decide.ParseHealth(ro.State)
		if err != nil {
			ox.since = now
			continue
		}
		if h == decide.Disabled && ro.DisabledBy != "operator" {
			// The configuration re-enabled it: start over.
			st.Origins[i] = decide.OriginState{}
			ox.since = now
			continue
		}
		st.Origins[i] = decide.OriginState{State: h, Failures: ro.Failures, Successes: ro.Successes}
		ox.since, ox.reason, ox.disabledBy = ro.Since, ro.Reason, ro.DisabledBy
		if v := ro.Verdict; v != "" {
			switch v {
			case "up":
				s.Outcomes[i].Verdict = vote.VerdictUp
			case "down":
				s.Outcomes[i].Verdict = vote.VerdictDown
			}
		}
	}
	decide.LevelHealth(s.Spec, st, s.Levels)
	return events
}
