package decide_test

import (
	"testing"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
)

// FuzzDecide drives a randomly shaped site through random rounds and
// actions and checks the core's invariants: no panic; states and events only
// as the spec allows; the current level always exists; never an automatic
// switch to a confirmed-down level, nor to a non-healthy one while a healthy
// one exists; all_levels_unhealthy only when every level is unhealthy.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{3, 1, 2, 0, 1, 2, 0, 2, 2, 2, 1, 1, 1, 7, 9})
	f.Add([]byte{5, 0, 0, 1, 2, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 200, 201, 130})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		n := 2 + int(data[0])%4
		failback := decide.Failback(data[1] % 2)
		healthy, unhealthy := int32(1+data[2]%3), int32(1+data[3]%3)
		data = data[4:]
		origins := make([]decide.OriginSpec, n)
		for i := range origins {
			lvl := 1
			if i < len(data) {
				lvl = 1 + int(data[i])%4*2 // gaps: 1, 3, 5, 7
			}
			origins[i] = decide.OriginSpec{Name: string(rune('a' + i)), Level: lvl}
		}
		if len(data) > n {
			data = data[n:]
		} else {
			data = nil
		}
		spec := decide.NewSiteSpec("s", origins, failback, healthy, unhealthy, true)
		st := decide.NewSiteState(spec, nil)
		levels := make([]decide.Health, len(spec.Levels))
		verdicts := make([]vote.Verdict, n)
		for len(data) > 0 {
			op := data[0]
			data = data[1:]
			switch {
			case op >= 240: // switch
				lvl := int(op-240) + 1
				_, err := decide.Switch(spec, st, lvl)
				if (err == nil) != (spec.LevelIndex(lvl) >= 0) {
					t.Fatalf("switch to %d: err %v", lvl, err)
				}
			case op >= 220: // disable / enable
				name := string(rune('a' + int(op)%n))
				before := st.Origins[int(op)%n].State
				var ev []decide.Event
				if op >= 230 {
					ev, _ = decide.Disable(spec, st, name)
				} else {
					ev, _ = decide.Enable(spec, st, name)
				}
				if len(ev) > 1 || (len(ev) == 1 && ev[0].From != before) {
					t.Fatalf("action events %v from %s", ev, before)
				}
			default: // a round: two bits per origin
				for i := range verdicts {
					verdicts[i] = vote.Verdict((int(op) >> (2 * (i % 4))) % 3)
				}
				prev := make([]decide.OriginState, n)
				copy(prev, st.Origins)
				events := decide.Round(spec, st, verdicts, levels, nil)
				checkRound(t, spec, st, prev, levels, events)
			}
			if spec.LevelIndex(st.Level) < 0 {
				t.Fatalf("current level %d does not exist", st.Level)
			}
		}
	})
}

func checkRound(t *testing.T, spec *decide.SiteSpec, st *decide.SiteState, prev []decide.OriginState, levels []decide.Health, events []decide.Event) {
	t.Helper()
	anyHealthy, allUnhealthy := false, true
	for _, h := range levels {
		anyHealthy = anyHealthy || h == decide.Healthy
		allUnhealthy = allUnhealthy && h == decide.Unhealthy
		if h == decide.Disabled {
			t.Fatalf("a level cannot be disabled")
		}
	}
	for i, o := range st.Origins {
		if o.State > decide.Disabled {
			t.Fatalf("origin state %d out of range", o.State)
		}
		if (prev[i].State == decide.Disabled) != (o.State == decide.Disabled) {
			t.Fatalf("a round changed whether origin %d is disabled", i)
		}
		if o.State == decide.Healthy && prev[i].State != decide.Healthy && o.Successes < spec.HealthyThreshold {
			t.Fatalf("origin became healthy with %d successes", o.Successes)
		}
		if o.State == decide.Unhealthy && prev[i].State != decide.Unhealthy && o.Failures < spec.UnhealthyThreshold {
			t.Fatalf("origin became unhealthy with %d failures", o.Failures)
		}
	}
	for _, e := range events {
		switch e.Kind {
		case decide.KindOriginState:
			if e.From == e.To || e.To == decide.Disabled || e.From == decide.Disabled || e.To == decide.Unknown {
				t.Fatalf("round emitted impossible transition %v", e)
			}
		case decide.KindLevelSwitched:
			if e.Reason != decide.ReasonFailover && e.Reason != decide.ReasonFailback {
				t.Fatalf("a round switched with reason %s", e.Reason)
			}
			to := levels[spec.LevelIndex(e.ToLevel)]
			if to == decide.Unhealthy {
				t.Fatalf("switched to confirmed-down level %d (levels %v)", e.ToLevel, levels)
			}
			if anyHealthy && to != decide.Healthy {
				t.Fatalf("switched to %s level %d while a healthy level exists (%v)", to, e.ToLevel, levels)
			}
		case decide.KindAllLevelsUnhealthy:
			if !allUnhealthy {
				t.Fatalf("all_levels_unhealthy with levels %v", levels)
			}
		case decide.KindFailbackAvailable:
			if decide.EffectiveFailback(spec, st) != decide.FailbackManual || e.Level >= st.Level || levels[spec.LevelIndex(e.Level)] != decide.Healthy {
				t.Fatalf("failback_available %d on level %d, levels %v", e.Level, st.Level, levels)
			}
		default:
			t.Fatalf("unknown event %v", e)
		}
	}
}
