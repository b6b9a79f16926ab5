package decide

import "github.com/vigilcdn/vigil/core/vote"

// The anti-flap rules (docs/antiflap.md): quarantine, the failback dwell
// and flap damping. They are opt-in per site: a SiteSpec without them
// (AntiFlap nil) decides exactly as before, and its SiteState keeps no
// anti-flap memory (AntiFlap nil).
//
// The rules need a clock. The core touches none: the caller passes the
// round's time to RoundAt as a number of ticks, and gives the durations
// of the spec in the same unit (the daemon uses wall-clock milliseconds,
// `vigil simulate` the round's index, see core/fleet).

// AntiFlapSpec is a site's anti-flap settings, in the caller's ticks. A zero
// field is a rule that is off.
type AntiFlapSpec struct {
	// Quarantine is how long an origin that became unhealthy cannot be
	// shown healthy again.
	Quarantine int64
	// Dwell is the least time on a level before an automatic failback
	// leaves it (while the level is not unhealthy).
	Dwell int64
	// FlapChanges and FlapWithin: more than FlapChanges changes of an
	// origin's judged state (between healthy and unhealthy) within
	// FlapWithin hold it unhealthy until it has been stable for
	// FlapWithin.
	FlapChanges int32
	FlapWithin  int64
	// Ramp is the failback ramp (ramp.go); nil for none.
	Ramp *RampSpec
}

// originRules reports whether a rule of the spec concerns origins (and so
// needs per-origin memory).
func (a *AntiFlapSpec) originRules() bool { return a.Quarantine > 0 || a.FlapChanges > 0 }

// AntiFlapState is the anti-flap memory of a site. Times are in ticks; 0
// means "none".
type AntiFlapState struct {
	// LevelSince is when an automatic switch (failover or failback) last
	// entered the current level; 0 when none did since a manual switch or
	// since the state was first kept (no dwell holds then).
	LevelSince int64
	// Origins has one entry per SiteSpec.Origins entry when a rule
	// concerns origins (quarantine or flap), nil otherwise.
	Origins []OriginFlap
	// Ramp is the failback ramp in progress (ramp.go); nil for none.
	Ramp *RampState
}

// OriginFlap is the anti-flap memory of one origin.
type OriginFlap struct {
	// Raw is the state the thresholds alone give (today's rules): the
	// origin's State is Raw, except that a Raw healthy is shown unhealthy
	// while the origin is quarantined or held as flapping.
	Raw Health
	// Held is set while the origin is held unhealthy as flapping.
	Held bool
	// QuarantineUntil is when the quarantine ends; 0 for none.
	QuarantineUntil int64
	// HeldSince is when the flapping hold began; 0 when not held.
	HeldSince int64
	// LastChange is when Raw last changed between healthy and unhealthy
	// (kept only with the flap rule): the hold ends FlapWithin after it.
	LastChange int64
	// Changes are the times of the recent changes of Raw between healthy
	// and unhealthy, oldest first, at most FlapChanges of them (the flap
	// rule's window; empty while held).
	Changes []int64
}

// FlapUntil is the earliest time the flapping hold can end: FlapWithin
// after the last change, if no other change comes.
func (x *OriginFlap) FlapUntil(spec *AntiFlapSpec) int64 {
	if !x.Held || spec == nil {
		return 0
	}
	return x.LastChange + spec.FlapWithin
}

// DwellUntil is when the failback dwell on the current level ends; 0 when
// no dwell holds (no dwell configured, the site on its top level, or no
// automatic switch entered the current level).
func DwellUntil(spec *SiteSpec, st *SiteState) int64 {
	a := spec.AntiFlap
	if a == nil || a.Dwell <= 0 || st.AntiFlap == nil || st.AntiFlap.LevelSince == 0 || st.Level == spec.TopLevel() {
		return 0
	}
	return st.AntiFlap.LevelSince + a.Dwell
}

// syncAntiFlap makes st's anti-flap memory fit spec: none without rules; a
// fresh one (each origin's Raw its State) where it is missing, for example
// on the first round, after a restore from a record that had none, or when
// the configuration turned a rule on; and an origin's entry started over
// where it disagrees with the origin's state (disabled or enabled meanwhile,
// or a shown healthy that is not judged healthy).
func syncAntiFlap(spec *SiteSpec, st *SiteState) {
	a := spec.AntiFlap
	if a == nil {
		st.AntiFlap = nil
		return
	}
	if st.AntiFlap == nil {
		st.AntiFlap = &AntiFlapState{}
	}
	x := st.AntiFlap
	syncRamp(spec, st)
	if !a.originRules() {
		x.Origins = nil
		return
	}
	if len(x.Origins) != len(st.Origins) {
		x.Origins = make([]OriginFlap, len(st.Origins))
		for i := range x.Origins {
			x.Origins[i].Raw = st.Origins[i].State
		}
	}
	for i := range x.Origins {
		o, f := &st.Origins[i], &x.Origins[i]
		if (o.State == Disabled) != (f.Raw == Disabled) || (o.State == Healthy && f.Raw != Healthy) ||
			(o.State == Unknown && f.Raw != Unknown) {
			*f = OriginFlap{Raw: o.State}
		}
		if a.FlapChanges <= 0 {
			f.Held, f.HeldSince, f.LastChange, f.Changes = false, 0, 0, nil
		}
		if a.Quarantine <= 0 {
			f.QuarantineUntil = 0
		}
	}
}

// applyAntiFlap is step 1 (origin health) for one enabled origin under the
// anti-flap rules: the verdict moves the judged state (f.Raw) by today's
// rule, then quarantine and flap damping decide what is shown (o.State).
// flap is +1 when a flapping hold began, -1 when one ended.
func applyAntiFlap(a *AntiFlapSpec, o *OriginState, f *OriginFlap, v vote.Verdict, healthy, unhealthy int32, now int64) (flap int) {
	raw := OriginState{State: f.Raw, Failures: o.Failures, Successes: o.Successes}
	from := raw.State
	ApplyVerdict(&raw, v, healthy, unhealthy)
	o.Failures, o.Successes, f.Raw = raw.Failures, raw.Successes, raw.State
	if f.Raw != from {
		// (a) Quarantine: every change to unhealthy (re)starts it.
		if f.Raw == Unhealthy && a.Quarantine > 0 {
			f.QuarantineUntil = now + a.Quarantine
		}
		// (b) Flap damping: a change between healthy and unhealthy.
		if a.FlapChanges > 0 && from != Unknown {
			f.LastChange = now
			if !f.Held {
				keep := f.Changes[:0]
				for _, t := range f.Changes {
					if now-t < a.FlapWithin {
						keep = append(keep, t)
					}
				}
				f.Changes = append(keep, now)
				if len(f.Changes) > int(a.FlapChanges) {
					f.Held, f.HeldSince, f.Changes, flap = true, now, nil, 1
				}
			}
		}
	}
	// (c) The hold ends once the judged state has been stable for
	// FlapWithin; (d) the quarantine once its time has come.
	if f.Held && now-f.LastChange >= a.FlapWithin {
		f.Held, f.HeldSince, flap = false, 0, -1
	}
	if f.QuarantineUntil != 0 && now >= f.QuarantineUntil {
		f.QuarantineUntil = 0
	}
	// (e) What is shown.
	o.State = f.Raw
	if o.State == Healthy && (f.Held || f.QuarantineUntil != 0) {
		o.State = Unhealthy
	}
	return flap
}

// dwellHolds reports whether the failback dwell keeps the site on its
// current level in this round: a dwell is set, an automatic switch entered
// the level less than Dwell ago, and the level is not unhealthy (leaving an
// unhealthy level is never delayed).
func dwellHolds(spec *SiteSpec, st *SiteState, cur Health, now int64) bool {
	if cur == Unhealthy {
		return false
	}
	until := DwellUntil(spec, st)
	return until != 0 && now < until
}

// actionAntiFlap starts an origin's anti-flap memory over after an operator
// disabled or enabled it, with the end of a flapping hold as an event.
func actionAntiFlap(spec *SiteSpec, st *SiteState, i int, events []Event) []Event {
	if st.AntiFlap == nil || len(st.AntiFlap.Origins) != len(st.Origins) {
		return events
	}
	f := &st.AntiFlap.Origins[i]
	if f.Held {
		events = append(events, Event{Kind: KindOriginFlapping, Origin: spec.Origins[i].Name, Flapping: false})
	}
	*f = OriginFlap{Raw: st.Origins[i].State}
	return events
}
