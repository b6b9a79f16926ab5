package engine

import (
	"sort"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/readmodel"
	"github.com/vigilcdn/vigil/core/store"
)

// The failback ramp (docs/antiflap.md#failback-ramp) in the engine:
// fingerprinted, recorded, compared and restored with the site's anti-flap
// memory, and shown in the site view and the metrics. A site without a
// ramp in progress adds nothing to any of them, and a fleet without a ramp
// configured writes no vigil_site_level_weight at all.

// rampSum adds a ramp in progress to a state fingerprint.
func rampSum(put func(uint64), st *decide.SiteState) {
	if st.AntiFlap == nil || st.AntiFlap.Ramp == nil {
		return
	}
	r := st.AntiFlap.Ramp
	put(uint64(r.From) | uint64(uint32(r.Step))<<32)
	put(uint64(r.StepAt))
}

// rampRecord writes the ramp in progress into r.
func rampRecord(s *fleet.Site, r *store.Site) {
	rp, ok := decide.RampOf(s.Spec, s.State)
	if !ok {
		return
	}
	r.Ramp = &store.SiteRamp{From: rp.From, Weight: rp.Weight, StepAt: fleet.TickTime(s.State.AntiFlap.Ramp.StepAt)}
}

// rampSame reports whether r holds s's ramp in progress.
func rampSame(s *fleet.Site, r *store.Site) bool {
	var want store.Site
	rampRecord(s, &want)
	if (want.Ramp == nil) != (r.Ramp == nil) {
		return false
	}
	return want.Ramp == nil || (want.Ramp.From == r.Ramp.From && want.Ramp.Weight == r.Ramp.Weight && want.Ramp.StepAt.Equal(r.Ramp.StepAt))
}

// rampRestore takes a record's ramp back into a site whose configuration
// has a ramp (s.State.AntiFlap already made): the step is the first of the
// configured steps at or above the recorded weight; none when that is the
// last (100), or when the level left is gone or is the current level.
func rampRestore(s *fleet.Site, r *store.Site) {
	af := s.Spec.AntiFlap
	if af == nil || af.Ramp == nil || r.Ramp == nil || s.State.AntiFlap == nil {
		return
	}
	if r.Ramp.From == s.State.Level || s.Spec.LevelIndex(r.Ramp.From) < 0 {
		return
	}
	steps := af.Ramp.Steps
	i := sort.SearchInts(steps, r.Ramp.Weight)
	if i >= len(steps)-1 {
		return
	}
	s.State.AntiFlap.Ramp = &decide.RampState{From: r.Ramp.From, Step: i, StepAt: fleet.TimeTick(r.Ramp.StepAt)}
}

// rampSnap is the read side's copy of a ramp in progress; nil for none.
type rampSnap struct {
	from, weight int
	next         int64
}

func rampSnapOf(s *fleet.Site) *rampSnap {
	r, ok := decide.RampOf(s.Spec, s.State)
	if !ok {
		return nil
	}
	return &rampSnap{from: r.From, weight: r.Weight, next: r.NextAt}
}

// rampOf is the ramp in the read model's terms.
func rampOf(snap *rampSnap) *readmodel.Ramp {
	if snap == nil {
		return nil
	}
	r := &readmodel.Ramp{From: snap.from, Weight: snap.weight}
	if snap.next != 0 {
		r.NextAt = fleet.TickTime(snap.next)
	}
	return r
}
