package engine

import (
	"hash/fnv"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/store"
)

// Who disabled an origin.
const (
	disabledByNone uint8 = iota
	disabledByConfig
	disabledByOperator
)

var disabledByNames = [...]string{"", "config", "operator"}

func parseDisabledBy(s string) uint8 {
	switch s {
	case "config":
		return disabledByConfig
	case "operator":
		return disabledByOperator
	}
	return disabledByNone
}

// originInfo is what the engine keeps of an origin beside the decision
// core's state: all of it is durable.
type originInfo struct {
	since      int64  // Unix nanoseconds of the last state change; 0 unknown
	cause      string // why the state last changed, such as "direct: timeout"
	disabledBy uint8
}

// siteInfo is what the engine keeps of a site beside the decision core's
// state, by fleet index.
type siteInfo struct {
	// probedAt is when the site was last probed (Unix nanoseconds, 0 for
	// never).
	probedAt int64
	// stateSum fingerprints the durable state as last marked for
	// writing: a round that leaves it unchanged writes nothing.
	stateSum uint64
	origins  []originInfo
	// drill is the site's failover drill, nil for none (drill.go); never
	// changed in place, so that a copy of the info keeps its own.
	drill *drillState
}

func newSiteInfo(s *fleet.Site) siteInfo {
	return siteInfo{origins: make([]originInfo, len(s.Spec.Origins))}
}

// stateSum fingerprints what of a site's state is stored: level, hold,
// alert memory, baseline, and each origin's state, counters and info.
func stateSum(s *fleet.Site, x *siteInfo) uint64 {
	h := fnv.New64a()
	var b [16]byte
	put := func(v uint64) {
		for i := 0; i < 8; i++ {
			b[i] = byte(v >> (8 * i))
		}
		_, _ = h.Write(b[:8])
	}
	st := s.State
	flags := uint64(0)
	if st.ManualHold {
		flags |= 1
	}
	if st.Alerted {
		flags |= 2
	}
	if st.Baseline != nil {
		flags |= 4
	}
	put(uint64(st.Level))
	put(flags)
	for _, l := range st.Baseline {
		put(uint64(l))
	}
	for i, o := range st.Origins {
		put(uint64(o.State) | uint64(uint32(o.Failures))<<8 | uint64(uint32(o.Successes))<<40)
		oi := &x.origins[i]
		put(uint64(oi.since))
		put(uint64(oi.disabledBy))
		_, _ = h.Write([]byte(oi.cause))
	}
	antiflapSum(put, st)
	drillSum(put, x)
	return h.Sum64()
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// record is the store's form of a site.
func record(s *fleet.Site, x *siteInfo) store.Site {
	r := store.Site{
		Name:         s.Spec.Name,
		Level:        s.State.Level,
		ManualHold:   s.State.ManualHold,
		Alerted:      s.State.Alerted,
		LastProbed:   s.LastProbed,
		LastProbedAt: timeOf(x.probedAt),
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
		oi := &x.origins[i]
		r.Origins[o.Name] = store.Origin{
			State: st.State.String(), Failures: st.Failures, Successes: st.Successes,
			Reason: oi.cause, Since: timeOf(oi.since), DisabledBy: disabledByNames[oi.disabledBy],
		}
	}
	antiflapRecord(s, &r)
	drillRecord(x, &r)
	return r
}

// sameState reports whether r holds the state site s has in memory (x its
// info): what record would write of the decisions, without the display
// fields (reasons, times, probe marks) that ride along with them.
func sameState(s *fleet.Site, x *siteInfo, r *store.Site) bool {
	if r.Level != s.State.Level || r.ManualHold != s.State.ManualHold || r.Alerted != s.State.Alerted ||
		len(r.Origins) != len(s.Spec.Origins) || (r.Baseline == nil) != (s.State.Baseline == nil) {
		return false
	}
	if s.State.Baseline != nil {
		if len(r.Baseline) != len(s.Spec.Levels) {
			return false
		}
		for i, l := range s.Spec.Levels {
			if r.Baseline[l] != s.State.Baseline[i].String() {
				return false
			}
		}
	}
	for i, o := range s.Spec.Origins {
		ro, ok := r.Origins[o.Name]
		st := s.State.Origins[i]
		if !ok || ro.State != st.State.String() || ro.Failures != st.Failures || ro.Successes != st.Successes ||
			ro.DisabledBy != disabledByNames[x.origins[i].disabledBy] {
			return false
		}
	}
	return antiflapSame(s, r) && drillSame(x, r)
}

// restore applies a stored record to a freshly built site, following the
// configuration where the two disagree: new origins start unknown, removed
// ones are dropped, an origin the configuration disables is disabled, one
// the operator disabled stays disabled, and a current level that no longer
// exists moves the site to its top level with an event. changed reports
// whether the result differs from the record (it must be written again).
func restore(s *fleet.Site, x *siteInfo, r store.Site, configEnabled []bool, now int64) (events []decide.Event, changed bool) {
	st := s.State
	st.ManualHold, st.Alerted = r.ManualHold, r.Alerted
	s.LastProbed = r.LastProbed
	x.probedAt = nanos(r.LastProbedAt)
	if s.Spec.LevelIndex(r.Level) >= 0 {
		st.Level = r.Level
	} else {
		st.Level = s.Spec.TopLevel()
		st.ManualHold = false
		changed = true
		if r.Level != 0 {
			events = append(events, decide.Event{Kind: decide.KindLevelSwitched, FromLevel: r.Level, ToLevel: st.Level, Reason: decide.ReasonConfig})
		}
	}
	if r.Baseline != nil {
		st.Baseline = make([]decide.Health, len(s.Spec.Levels))
		for i, l := range s.Spec.Levels {
			h, err := decide.ParseHealth(r.Baseline[l])
			if err != nil {
				changed = true // a level new to the record
			}
			st.Baseline[i] = h
		}
		if len(r.Baseline) != len(s.Spec.Levels) {
			changed = true
		}
	}
	if len(r.Origins) != len(s.Spec.Origins) {
		changed = true // some origin was removed or added
	}
	for i, o := range s.Spec.Origins {
		oi := &x.origins[i]
		ro, ok := r.Origins[o.Name]
		if !configEnabled[i] {
			st.Origins[i] = decide.OriginState{State: decide.Disabled}
			oi.disabledBy, oi.cause = disabledByConfig, "disabled in the configuration"
			if ok && ro.State == "disabled" {
				oi.since = nanos(ro.Since)
				if ro.DisabledBy == "config" && ro.Reason == oi.cause {
					continue
				}
			} else {
				oi.since = now
			}
			changed = true
			continue
		}
		if !ok { // a new origin: unknown
			oi.since, changed = now, true
			continue
		}
		h, err := decide.ParseHealth(ro.State)
		if err != nil {
			oi.since, changed = now, true
			continue
		}
		if h == decide.Disabled && ro.DisabledBy != "operator" {
			// The configuration re-enabled it: start over.
			st.Origins[i] = decide.OriginState{}
			oi.since, oi.cause, changed = now, "enabled in the configuration", true
			continue
		}
		st.Origins[i] = decide.OriginState{State: h, Failures: ro.Failures, Successes: ro.Successes}
		oi.since, oi.cause, oi.disabledBy = nanos(ro.Since), ro.Reason, parseDisabledBy(ro.DisabledBy)
	}
	antiflapRestore(s, &r)
	if evs, ch := drillRestore(s, x, &r); ch {
		events, changed = append(events, evs...), true
	}
	decide.LevelHealth(s.Spec, st, s.Levels)
	return events, changed
}
