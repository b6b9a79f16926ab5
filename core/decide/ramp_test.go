package decide_test

import (
	"testing"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
)

// rampRun plays rounds 1..len(rounds) and returns, after each, the level,
// the ramp's weight (0 for none) and the level it comes from, and the
// reasons of the level switches, "-" for a round without one.
func rampRun(spec *decide.SiteSpec, st *decide.SiteState, rounds [][]vote.Verdict) (lvl, weight, from []int, why []string) {
	levels := make([]decide.Health, len(spec.Levels))
	for r, v := range rounds {
		w := "-"
		for _, ev := range decide.RoundAt(spec, st, v, levels, nil, int64(r+1)) {
			if ev.Kind == decide.KindLevelSwitched {
				w = ev.Reason.String()
			}
		}
		rp, _ := decide.RampOf(spec, st)
		lvl, weight, from, why = append(lvl, st.Level), append(weight, rp.Weight), append(from, rp.From), append(why, w)
	}
	return
}

func eqInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRampRules(t *testing.T) {
	U, D, N := vote.VerdictUp, vote.VerdictDown, vote.VerdictNone
	up := []vote.Verdict{U, U, U}
	aDown := []vote.Verdict{D, D, U}
	bDown := []vote.Verdict{U, U, D}
	steps := &decide.RampSpec{Steps: []int{10, 50, 100}, Interval: 2}
	tests := []struct {
		name   string
		af     decide.AntiFlapSpec
		rounds [][]vote.Verdict
		level  []int
		weight []int
		why    []string
	}{
		{"steps every interval, over at 100", decide.AntiFlapSpec{Ramp: steps},
			[][]vote.Verdict{up, aDown, up, up, up, up, up},
			[]int{1, 2, 1, 1, 1, 1, 1}, []int{0, 0, 10, 10, 50, 50, 0},
			[]string{"-", "failover", "failback", "-", "-", "-", "-"}},
		{"a none verdict keeps the level healthy: the step is taken", decide.AntiFlapSpec{Ramp: steps},
			[][]vote.Verdict{up, aDown, up, {N, N, N}, {N, N, N}},
			[]int{1, 2, 1, 1, 1}, []int{0, 0, 10, 10, 50}, []string{"-", "failover", "failback", "-", "-"}},
		{"a failure of the recovering level fails over back at once", decide.AntiFlapSpec{Ramp: steps},
			[][]vote.Verdict{up, aDown, up, aDown, up},
			[]int{1, 2, 1, 2, 1}, []int{0, 0, 10, 0, 10}, []string{"-", "failover", "failback", "failover", "failback"}},
		{"the level left failing ends the ramp", decide.AntiFlapSpec{Ramp: steps},
			[][]vote.Verdict{up, aDown, up, bDown, up},
			[]int{1, 2, 1, 1, 1}, []int{0, 0, 10, 0, 0}, []string{"-", "failover", "failback", "-", "-"}},
		{"no ramp away from an unhealthy level", decide.AntiFlapSpec{Ramp: steps},
			[][]vote.Verdict{up, aDown, bDown},
			[]int{1, 2, 1}, []int{0, 0, 0}, []string{"-", "failover", "failback"}},
		{"the dwell delays the ramp's start", decide.AntiFlapSpec{Dwell: 3, Ramp: steps},
			[][]vote.Verdict{up, aDown, up, up, up, up, up},
			[]int{1, 2, 2, 2, 1, 1, 1}, []int{0, 0, 0, 0, 10, 10, 50},
			[]string{"-", "failover", "-", "-", "failback", "-", "-"}},
		{"two steps", decide.AntiFlapSpec{Ramp: &decide.RampSpec{Steps: []int{50, 100}, Interval: 1}},
			[][]vote.Verdict{up, aDown, up, up},
			[]int{1, 2, 1, 1}, []int{0, 0, 50, 0}, []string{"-", "failover", "failback", "-"}},
		{"without a ramp", decide.AntiFlapSpec{Dwell: 1},
			[][]vote.Verdict{up, aDown, up, up},
			[]int{1, 2, 1, 1}, []int{0, 0, 0, 0}, []string{"-", "failover", "failback", "-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			af := tt.af
			spec, st := antiSite(&af)
			lvl, w, _, why := rampRun(spec, st, tt.rounds)
			if !eqInts(lvl, tt.level) || !eqInts(w, tt.weight) || len(why) != len(tt.why) {
				t.Fatalf("levels %v weights %v, want %v %v", lvl, w, tt.level, tt.weight)
			}
			for i := range why {
				if why[i] != tt.why[i] {
					t.Fatalf("switches %v, want %v", why, tt.why)
				}
			}
		})
	}
}

// TestRampThreeLevels: a failback during a ramp, to a level higher still,
// starts a new ramp from the level it leaves; a failure of the recovering
// level whose level left is unhealthy too fails over by the usual search.
func TestRampThreeLevels(t *testing.T) {
	U, D := vote.VerdictUp, vote.VerdictDown
	spec := decide.NewSiteSpec("s", []decide.OriginSpec{{Name: "a1", Level: 1}, {Name: "b1", Level: 2}, {Name: "c1", Level: 3}},
		decide.FailbackAuto, 1, 1, true)
	spec.AntiFlap = &decide.AntiFlapSpec{Ramp: &decide.RampSpec{Steps: []int{10, 50, 100}, Interval: 5}}
	st := decide.NewSiteState(spec, nil)
	lvl, w, from, _ := rampRun(spec, st, [][]vote.Verdict{{U, U, U}, {D, D, U}, {D, U, U}, {U, U, U}, {U, D, U}})
	if !eqInts(lvl, []int{1, 3, 2, 1, 1}) || !eqInts(w, []int{0, 0, 10, 10, 0}) || !eqInts(from, []int{0, 0, 3, 2, 0}) {
		t.Fatalf("levels %v weights %v from %v", lvl, w, from)
	}
	// Level 1 ramping from 2; 1 and 2 fail together: the search finds 3.
	st = decide.NewSiteState(spec, nil)
	lvl, w, _, _ = rampRun(spec, st, [][]vote.Verdict{{U, U, U}, {D, U, U}, {U, U, U}, {D, D, U}})
	if !eqInts(lvl, []int{1, 2, 1, 3}) || !eqInts(w, []int{0, 0, 10, 0}) {
		t.Fatalf("levels %v weights %v", lvl, w)
	}
}

// TestRampActions: a manual switch ends the ramp, to the current level as
// to another; disable and enable leave it to the next round, which takes
// no step while the recovering level is unknown and the overdue step once
// it is healthy.
func TestRampActions(t *testing.T) {
	U, D, N := vote.VerdictUp, vote.VerdictDown, vote.VerdictNone
	spec, st := antiSite(&decide.AntiFlapSpec{Ramp: &decide.RampSpec{Steps: []int{10, 50, 100}, Interval: 1}})
	levels := make([]decide.Health, len(spec.Levels))
	now := int64(0)
	round := func(v ...vote.Verdict) int {
		now++
		decide.RoundAt(spec, st, v, levels, nil, now)
		r, _ := decide.RampOf(spec, st)
		return r.Weight
	}
	round(U, U, U)
	round(D, D, U)
	if w := round(U, U, U); w != 10 {
		t.Fatalf("failback: weight %d", w)
	}
	if ev, _ := decide.Switch(spec, st, 1); len(ev) != 0 {
		t.Fatalf("a switch to the current level: events %v", ev)
	}
	if _, ok := decide.RampOf(spec, st); ok {
		t.Fatal("a manual switch to the current level left the ramp on")
	}
	round(D, D, U)
	if w := round(U, U, U); w != 10 {
		t.Fatalf("second failback: weight %d", w)
	}
	// Level 1 unknown, never fewer than two enabled origins.
	if _, err := decide.Disable(spec, st, "a1"); err != nil {
		t.Fatal(err)
	}
	if _, err := decide.Enable(spec, st, "a1"); err != nil {
		t.Fatal(err)
	}
	if _, err := decide.Disable(spec, st, "a2"); err != nil {
		t.Fatal(err)
	}
	if r, ok := decide.RampOf(spec, st); !ok || r.Weight != 10 {
		t.Fatalf("disable and enable touched the ramp: %+v %v", r, ok)
	}
	if w := round(N, N, U); w != 10 || st.Level != 1 {
		t.Fatalf("level 1 unknown: weight %d level %d, want 10 on 1 (no step, no abort)", w, st.Level)
	}
	if w := round(U, N, U); w != 50 {
		t.Fatalf("level 1 healthy again: weight %d, want the overdue step 50", w)
	}
	if _, err := decide.Switch(spec, st, 2); err != nil {
		t.Fatal(err)
	}
	if _, ok := decide.RampOf(spec, st); ok || !st.ManualHold {
		t.Fatal("a manual switch to level 2 left the ramp on, or no manual hold")
	}
}

// TestRampPaused: a disable that leaves the site fewer than two enabled
// origins (no round probes it any more) ends the ramp.
func TestRampPaused(t *testing.T) {
	U, D := vote.VerdictUp, vote.VerdictDown
	spec, st := antiSite(&decide.AntiFlapSpec{Ramp: &decide.RampSpec{Steps: []int{10, 100}, Interval: 1}})
	rampRun(spec, st, [][]vote.Verdict{{U, U, U}, {D, D, U}, {U, U, U}})
	if _, err := decide.Disable(spec, st, "a2"); err != nil {
		t.Fatal(err)
	}
	if _, ok := decide.RampOf(spec, st); !ok {
		t.Fatal("two enabled origins left: the ramp should go on")
	}
	if _, err := decide.Disable(spec, st, "b1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := decide.RampOf(spec, st); ok {
		t.Fatal("one enabled origin left: the ramp should be over")
	}
}
