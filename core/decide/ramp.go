package decide

import "errors"

// The failback ramp (docs/antiflap.md#failback-ramp): an automatic failback
// away from a level that still works does not move all traffic at once.
// The site's current level becomes the recovering level and gets the
// ramp's first step (a per cent of new requests), the level left (From)
// the rest; each Interval in which the recovering level is healthy, the
// weight moves one step up, and at 100 the ramp is over. A failure of the
// recovering level during the ramp sends the site back to From at once, a
// failover.
//
// The ramp is opt-in (AntiFlapSpec.Ramp): without it nothing here runs and
// the site keeps no ramp memory.

// RampSpec is a site's ramp setting, in the caller's ticks.
type RampSpec struct {
	// Steps are per cents of new requests for the recovering level,
	// ascending, each from 1 to 100, the last 100 (at least two).
	Steps []int
	// Interval is the least time between two steps.
	Interval int64
}

// RampState is a failback ramp in progress.
type RampState struct {
	// From is the level number the failback left.
	From int
	// Step is the index in RampSpec.Steps of the current weight; never
	// the last (100: the ramp is then over and RampState gone).
	Step int
	// StepAt is when the current step began (the failback, for step 0).
	StepAt int64
}

// Ramp is what a ramp in progress means for the site now: the recovering
// level (the site's current level) gets Weight per cent of new requests,
// From the rest; the next step is due at NextAt.
type Ramp struct {
	Weight int
	From   int
	NextAt int64
}

// RampOf returns the site's ramp in progress, or false when there is none
// (no ramp configured, none started, or a memory that no longer fits the
// spec: the next round drops it).
func RampOf(spec *SiteSpec, st *SiteState) (Ramp, bool) {
	if spec.AntiFlap == nil || spec.AntiFlap.Ramp == nil || st.AntiFlap == nil || st.AntiFlap.Ramp == nil {
		return Ramp{}, false
	}
	rs, r := spec.AntiFlap.Ramp, st.AntiFlap.Ramp
	if r.From == st.Level || spec.levelIndex(r.From) < 0 || len(rs.Steps) < 2 || !spec.HealthCheck {
		return Ramp{}, false
	}
	step := min(max(r.Step, 0), len(rs.Steps)-2)
	return Ramp{Weight: rs.Steps[step], From: r.From, NextAt: r.StepAt + rs.Interval}, true
}

// rampPaused ends a ramp in progress when a disable leaves the site fewer
// than two enabled origins: no round probes it any more, so nothing would
// ever move the ramp on or abort it. (A new value, as Switch makes.)
func rampPaused(st *SiteState) {
	if st.AntiFlap == nil || st.AntiFlap.Ramp == nil || st.EnabledOrigins() >= 2 {
		return
	}
	x := *st.AntiFlap
	x.Ramp = nil
	st.AntiFlap = &x
}

// syncRamp makes the ramp memory fit the spec: none without a ramp
// setting, and none when its level left no longer exists or is the current
// level; a step beyond the (changed) steps is the last step before 100.
func syncRamp(spec *SiteSpec, st *SiteState) {
	x := st.AntiFlap
	if x.Ramp == nil {
		return
	}
	rs := spec.AntiFlap.Ramp
	if rs == nil || len(rs.Steps) < 2 || x.Ramp.From == st.Level || spec.levelIndex(x.Ramp.From) < 0 || !spec.HealthCheck {
		x.Ramp = nil
		return
	}
	x.Ramp.Step = min(max(x.Ramp.Step, 0), len(rs.Steps)-2)
}

// rampRound evaluates a ramp in progress at a round's end, after level
// health and before the switching steps (cur is the current level's index):
//
//   - the recovering level is unhealthy: the ramp is aborted, and the
//     failover goes back to From when From is not unhealthy (back is the
//     level index of From, else -1: the usual failover search);
//   - From is unhealthy (a second failure): the ramp ends, all traffic on
//     the recovering level;
//   - the recovering level is healthy and the step is due: one step up;
//     the last (100) ends the ramp.
//
// A round whose recovering level is unknown, or whose step is not due,
// changes nothing: a due step waits for a healthy round.
func rampRound(spec *SiteSpec, st *SiteState, levels []Health, cur int, now int64) (back int) {
	x := st.AntiFlap
	if x == nil || x.Ramp == nil {
		return -1
	}
	rs := spec.AntiFlap.Ramp
	fi := spec.levelIndex(x.Ramp.From)
	switch {
	case levels[cur] == Unhealthy:
		x.Ramp = nil
		if levels[fi] != Unhealthy {
			return fi
		}
	case levels[fi] == Unhealthy:
		x.Ramp = nil
	case levels[cur] == Healthy && now >= x.Ramp.StepAt+rs.Interval:
		x.Ramp.Step++
		x.Ramp.StepAt = now
		if x.Ramp.Step >= len(rs.Steps)-1 {
			x.Ramp = nil
		}
	}
	return -1
}

// rampStart is called on an automatic failback from level index left: a
// ramp starts when one is configured and the level left still works (not
// unhealthy); otherwise (and in place of any ramp in progress) there is
// none, and all traffic moves at once.
func rampStart(spec *SiteSpec, st *SiteState, levels []Health, left int, now int64) {
	x := st.AntiFlap
	if x == nil {
		return
	}
	x.Ramp = nil
	if rs := spec.AntiFlap.Ramp; rs != nil && len(rs.Steps) >= 2 && levels[left] != Unhealthy {
		x.Ramp = &RampState{From: spec.Levels[left], StepAt: now}
	}
}

// ErrNoRamp is the error of a ramped switch of a site without a ramp
// configured.
var ErrNoRamp = errors.New("the site has no ramp configured: add health_check { ramp { steps, interval } }, or switch without -ramp")

// SwitchRamped is Switch for an operator who asks for the way back to be
// ramped: a switch to a level above the current one, away from a current
// level that is not unhealthy, ramps traffic back as an automatic failback
// does (the level left keeps the rest of the traffic, step by step, while
// the level switched to stays healthy). A switch down, or away from an
// unhealthy level, moves at once, as Switch does. levels is the site's
// level health, now the time in the rules' ticks.
func SwitchRamped(spec *SiteSpec, st *SiteState, level int, levels []Health, now int64) ([]Event, error) {
	if spec.AntiFlap == nil || spec.AntiFlap.Ramp == nil || st.AntiFlap == nil {
		return nil, ErrNoRamp
	}
	from := st.Level
	events, err := Switch(spec, st, level)
	if err != nil {
		return nil, err
	}
	if li := spec.levelIndex(from); level < from && li >= 0 && li < len(levels) {
		rampStart(spec, st, levels, li, now)
	}
	return events, nil
}
