package engine

import (
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/readmodel"
	"github.com/vigilcdn/vigil/core/store"
)

// The anti-flap memory (docs/antiflap.md) in the engine: fingerprinted,
// recorded, compared and restored with the rest of a site's state, and
// shown in the origin views. A site without anti-flap rules has none
// (SiteState.AntiFlap nil), and every function here then does nothing, so
// its records, views and writes stay exactly as they were.

// antiflapSum adds the anti-flap memory to a state fingerprint.
func antiflapSum(put func(uint64), st *decide.SiteState) {
	af := st.AntiFlap
	if af == nil {
		return
	}
	put(uint64(af.LevelSince))
	rampSum(put, st)
	for i := range af.Origins {
		x := &af.Origins[i]
		held := uint64(0)
		if x.Held {
			held = 1
		}
		put(uint64(x.Raw) | held<<8 | uint64(len(x.Changes))<<16)
		put(uint64(x.QuarantineUntil))
		put(uint64(x.HeldSince))
		put(uint64(x.LastChange))
		for _, t := range x.Changes {
			put(uint64(t))
		}
	}
}

// antiflapRecord writes the anti-flap memory into r (record's work).
func antiflapRecord(s *fleet.Site, r *store.Site) {
	af := s.State.AntiFlap
	if af == nil {
		return
	}
	r.LevelSince = fleet.TickTime(af.LevelSince)
	rampRecord(s, r)
	if len(af.Origins) != len(s.Spec.Origins) {
		return
	}
	for i, o := range s.Spec.Origins {
		x := &af.Origins[i]
		if x.Raw == decide.Disabled {
			continue
		}
		ro := r.Origins[o.Name]
		ro.AntiFlap = &store.OriginAntiFlap{
			Judged: x.Raw.String(), Held: x.Held, HeldSince: fleet.TickTime(x.HeldSince),
			QuarantineUntil: fleet.TickTime(x.QuarantineUntil), LastChange: fleet.TickTime(x.LastChange),
		}
		for _, t := range x.Changes {
			ro.AntiFlap.Changes = append(ro.AntiFlap.Changes, fleet.TickTime(t))
		}
		r.Origins[o.Name] = ro
	}
}

// antiflapSame reports whether r holds s's anti-flap memory.
func antiflapSame(s *fleet.Site, r *store.Site) bool {
	want := store.Site{Origins: make(map[string]store.Origin, len(s.Spec.Origins))}
	for _, o := range s.Spec.Origins {
		want.Origins[o.Name] = store.Origin{}
	}
	antiflapRecord(s, &want)
	if !want.LevelSince.Equal(r.LevelSince) || !rampSame(s, r) {
		return false
	}
	for name, wo := range want.Origins {
		a, b := wo.AntiFlap, r.Origins[name].AntiFlap
		if (a == nil) != (b == nil) {
			return false
		}
		if a == nil {
			continue
		}
		if a.Judged != b.Judged || a.Held != b.Held || !a.HeldSince.Equal(b.HeldSince) || !a.QuarantineUntil.Equal(b.QuarantineUntil) ||
			!a.LastChange.Equal(b.LastChange) || len(a.Changes) != len(b.Changes) {
			return false
		}
		for k := range a.Changes {
			if !a.Changes[k].Equal(b.Changes[k]) {
				return false
			}
		}
	}
	return true
}

// antiflapRestore takes a record's anti-flap memory back into a site whose
// configuration has anti-flap rules. What the record lacks (a record from
// before the rules, or of a new origin) starts as "no anti-flap state";
// the decision core reconciles the rest at the site's next round.
func antiflapRestore(s *fleet.Site, r *store.Site) {
	if s.Spec.AntiFlap == nil {
		return
	}
	af := &decide.AntiFlapState{LevelSince: fleet.TimeTick(r.LevelSince)}
	s.State.AntiFlap = af
	rampRestore(s, r)
	a := s.Spec.AntiFlap
	if a.Quarantine <= 0 && a.FlapChanges <= 0 {
		return
	}
	af.Origins = make([]decide.OriginFlap, len(s.Spec.Origins))
	for i, o := range s.Spec.Origins {
		x := &af.Origins[i]
		x.Raw = s.State.Origins[i].State
		ro, ok := r.Origins[o.Name]
		if !ok || ro.AntiFlap == nil || x.Raw == decide.Disabled {
			continue
		}
		raw, err := decide.ParseHealth(ro.AntiFlap.Judged)
		if err != nil || raw == decide.Disabled {
			continue
		}
		x.Raw, x.Held = raw, ro.AntiFlap.Held
		x.HeldSince, x.QuarantineUntil = fleet.TimeTick(ro.AntiFlap.HeldSince), fleet.TimeTick(ro.AntiFlap.QuarantineUntil)
		x.LastChange = fleet.TimeTick(ro.AntiFlap.LastChange)
		for _, t := range ro.AntiFlap.Changes {
			x.Changes = append(x.Changes, fleet.TimeTick(t))
		}
	}
}

// antiflapSnap is the read side's copy of what the views show of the
// anti-flap memory; nil for a site without it.
type antiflapSnap struct {
	origins []originFlapSnap
}

type originFlapSnap struct {
	held                   bool
	since, until, quaUntil int64
}

func antiflapSnapOf(s *fleet.Site) *antiflapSnap {
	af := s.State.AntiFlap
	if af == nil || af.Origins == nil {
		return nil
	}
	v := &antiflapSnap{origins: make([]originFlapSnap, len(af.Origins))}
	for i := range af.Origins {
		x := &af.Origins[i]
		v.origins[i] = originFlapSnap{held: x.Held, since: x.HeldSince, until: x.FlapUntil(s.Spec.AntiFlap), quaUntil: x.QuarantineUntil}
	}
	return v
}

// antiflapFill adds an origin's flapping hold and quarantine to the read
// model's origin.
func antiflapFill(o *readmodel.Origin, v *antiflapSnap, i int) {
	if v == nil || i >= len(v.origins) {
		return
	}
	x := v.origins[i]
	at := func(t int64) time.Time {
		if t == 0 {
			return time.Time{}
		}
		return fleet.TickTime(t)
	}
	if x.held {
		o.Flapping, o.FlappingSince, o.FlappingUntil = true, at(x.since), at(x.until)
	}
	o.QuarantineUntil = at(x.quaUntil)
}
