package decide

import "github.com/vigilcdn/vigil/core/vote"

// ApplyVerdict moves one origin's counters and state by one verdict and
// reports whether the state changed. A disabled origin never changes.
//
// A counter stops growing once it has reached its threshold: past that
// point a higher count changes no decision (the state is already healthy,
// or unhealthy), and a counter that stays put lets a quiet origin's stored
// state stay unchanged round after round.
func ApplyVerdict(o *OriginState, v vote.Verdict, healthy, unhealthy int32) (from Health, changed bool) {
	from = o.State
	if o.State == Disabled {
		return from, false
	}
	switch v {
	case vote.VerdictUp:
		if o.Successes < healthy {
			o.Successes++
		}
		o.Failures = 0
		if o.Successes >= healthy {
			o.State = Healthy
		}
	case vote.VerdictDown:
		if o.Failures < unhealthy {
			o.Failures++
		}
		o.Successes = 0
		if o.Failures >= unhealthy {
			o.State = Unhealthy
		}
	}
	return from, o.State != from
}

// LevelHealth fills levels (len(spec.Levels)) with each level's health:
// healthy if any enabled origin is healthy, unhealthy if all enabled origins
// are unhealthy or there is none, otherwise unknown.
func LevelHealth(spec *SiteSpec, st *SiteState, levels []Health) {
	// Start every level at "no enabled origin yet" (unhealthy) and lift it.
	for i := range levels {
		levels[i] = Unhealthy
	}
	for i, o := range st.Origins {
		li := spec.Origins[i].LevelIndex
		switch o.State {
		case Disabled:
		case Healthy:
			levels[li] = Healthy
		case Unknown:
			if levels[li] != Healthy {
				levels[li] = Unknown
			}
		}
	}
}

// Round applies one probed round to a site: the verdicts (one per origin,
// disabled origins ignored), then level health and the switching rules. It
// writes every level's health after the round into levels (len(spec.Levels))
// and appends the events to events.
func Round(spec *SiteSpec, st *SiteState, verdicts []vote.Verdict, levels []Health, events []Event) []Event {
	return RoundAt(spec, st, verdicts, levels, events, 0)
}

// RoundAt is Round at time now (in the ticks of spec.AntiFlap), for a site
// with anti-flap rules. Without them (spec.AntiFlap nil) now is not used
// and RoundAt is Round.
func RoundAt(spec *SiteSpec, st *SiteState, verdicts []vote.Verdict, levels []Health, events []Event, now int64) []Event {
	af := spec.AntiFlap
	if af != nil || st.AntiFlap != nil {
		syncAntiFlap(spec, st)
	}
	// 1. Origin health.
	for i := range st.Origins {
		o := &st.Origins[i]
		if af != nil && st.AntiFlap.Origins != nil {
			if o.State == Disabled {
				continue
			}
			from := o.State
			flap := applyAntiFlap(af, o, &st.AntiFlap.Origins[i], verdicts[i], spec.HealthyThreshold, spec.UnhealthyThreshold, now)
			if o.State != from {
				events = append(events, Event{Kind: KindOriginState, Origin: spec.Origins[i].Name, From: from, To: o.State})
			}
			if flap != 0 {
				events = append(events, Event{Kind: KindOriginFlapping, Origin: spec.Origins[i].Name, Flapping: flap > 0})
			}
			continue
		}
		if from, changed := ApplyVerdict(o, verdicts[i], spec.HealthyThreshold, spec.UnhealthyThreshold); changed {
			events = append(events, Event{Kind: KindOriginState, Origin: spec.Origins[i].Name, From: from, To: o.State})
		}
	}
	LevelHealth(spec, st, levels)

	cur := spec.levelIndex(st.Level)
	if cur < 0 { // the caller reconciles config changes; be safe anyway
		cur = 0
		st.Level = spec.Levels[0]
	}
	eff := EffectiveFailback(spec, st)
	switched := false
	back := -1 // the ramp's level left, when a failure of the recovering level aborts it
	if af != nil {
		back = rampRound(spec, st, levels, cur, now)
	}

	// 2. Automatic failback to the highest healthy level above cur (held
	// by the failback dwell while cur is not unhealthy).
	if eff == FailbackAuto && (af == nil || !dwellHolds(spec, st, levels[cur], now)) {
		for i := 0; i < cur; i++ {
			if levels[i] == Healthy {
				events = append(events, Event{Kind: KindLevelSwitched, FromLevel: st.Level, ToLevel: spec.Levels[i], Reason: ReasonFailback})
				if af != nil {
					st.AntiFlap.LevelSince = now
					rampStart(spec, st, levels, cur, now)
				}
				st.Level, cur, switched = spec.Levels[i], i, true
				break
			}
		}
	}

	// 3. Failover: after cur ascending, then before cur ascending; the first
	// healthy, else the first unknown.
	if !switched && levels[cur] == Unhealthy {
		target := back
		if target < 0 {
			target = search(levels, cur, Healthy)
		}
		if target < 0 {
			target = search(levels, cur, Unknown)
		}
		if target >= 0 {
			events = append(events, Event{Kind: KindLevelSwitched, FromLevel: st.Level, ToLevel: spec.Levels[target], Reason: ReasonFailover})
			st.Level, cur = spec.Levels[target], target
			if af != nil {
				st.AntiFlap.LevelSince = now
				st.AntiFlap.Ramp = nil
			}
		} else if !st.Alerted {
			// 4. Every level is unhealthy: stay, alert once per incident.
			events = append(events, Event{Kind: KindAllLevelsUnhealthy, Level: st.Level})
			st.Alerted = true
		}
	}

	// 5. Manual failback notice, against the previous round's baseline.
	if eff == FailbackManual {
		for i := 0; i < cur; i++ {
			if levels[i] == Healthy && (st.Baseline == nil || st.Baseline[i] != Healthy) {
				events = append(events, Event{Kind: KindFailbackAvailable, Level: spec.Levels[i]})
			}
		}
	}

	// Round end: the alert memory and the baseline.
	for _, h := range levels {
		if h != Unhealthy {
			st.Alerted = false
			break
		}
	}
	if len(st.Baseline) != len(levels) {
		st.Baseline = make([]Health, len(levels))
	}
	copy(st.Baseline, levels)
	return events
}

// search looks for a level of health want in failover order: the levels
// after cur ascending, then the levels before cur ascending. It returns the
// level index or -1.
func search(levels []Health, cur int, want Health) int {
	n := len(levels)
	for k := 1; k < n; k++ {
		if i := (cur + k) % n; levels[i] == want {
			return i
		}
	}
	return -1
}
