package decide_test

import (
	"reflect"
	"testing"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
)

// antiSite is a site with a1, a2 on level 1 and b1 on level 2, thresholds
// 1/1, and the given anti-flap rules (ticks are rounds here).
func antiSite(af *decide.AntiFlapSpec) (*decide.SiteSpec, *decide.SiteState) {
	spec := decide.NewSiteSpec("s", []decide.OriginSpec{{Name: "a1", Level: 1}, {Name: "a2", Level: 1}, {Name: "b1", Level: 2}},
		decide.FailbackAuto, 1, 1, true)
	spec.AntiFlap = af
	return spec, decide.NewSiteState(spec, nil)
}

// run plays rounds 1..len(rounds), each a verdict per origin, and returns
// the states of a1 and the level after each round, and every event kind
// seen with its round.
func run(spec *decide.SiteSpec, st *decide.SiteState, rounds [][]vote.Verdict) (a1 []decide.Health, lvl []int, flaps []int) {
	levels := make([]decide.Health, len(spec.Levels))
	for r, v := range rounds {
		for _, ev := range decide.RoundAt(spec, st, v, levels, nil, int64(r+1)) {
			if ev.Kind == decide.KindOriginFlapping {
				if ev.Flapping {
					flaps = append(flaps, r+1)
				} else {
					flaps = append(flaps, -(r + 1))
				}
			}
		}
		a1, lvl = append(a1, st.Origins[0].State), append(lvl, st.Level)
	}
	return
}

func TestAntiFlapRules(t *testing.T) {
	H, X := decide.Healthy, decide.Unhealthy
	all := func(v ...vote.Verdict) []vote.Verdict { return v }
	tests := []struct {
		name   string
		af     *decide.AntiFlapSpec
		rounds [][]vote.Verdict
		a1     []decide.Health
		level  []int
		flaps  []int
	}{
		{"quarantine keeps a recovered origin unhealthy until its end",
			&decide.AntiFlapSpec{Quarantine: 3},
			[][]vote.Verdict{all(U, U, U), all(D, U, U), all(U, U, U), all(U, U, U), all(U, U, U)},
			[]decide.Health{H, X, X, X, H}, []int{1, 1, 1, 1, 1}, nil},
		{"a new failure restarts the quarantine",
			&decide.AntiFlapSpec{Quarantine: 2},
			[][]vote.Verdict{all(U, U, U), all(D, U, U), all(U, U, U), all(D, U, U), all(U, U, U), all(U, U, U)},
			[]decide.Health{H, X, X, X, X, H}, []int{1, 1, 1, 1, 1, 1}, nil},
		{"the quarantine waits for the good rounds too",
			&decide.AntiFlapSpec{Quarantine: 2},
			[][]vote.Verdict{all(U, U, U), all(D, U, U), all(N, U, U), all(N, U, U), all(U, U, U)},
			[]decide.Health{H, X, X, X, H}, []int{1, 1, 1, 1, 1}, nil},
		{"failover is immediate under a dwell; failback waits for it",
			&decide.AntiFlapSpec{Dwell: 3},
			[][]vote.Verdict{all(U, U, U), all(D, D, U), all(U, U, U), all(U, U, U), all(U, U, U)},
			[]decide.Health{H, X, H, H, H}, []int{1, 2, 2, 2, 1}, nil},
		{"a dwell never keeps the site on an unhealthy level",
			&decide.AntiFlapSpec{Dwell: 10},
			[][]vote.Verdict{all(U, U, U), all(D, D, U), all(U, U, U), all(U, U, D)},
			[]decide.Health{H, X, H, H}, []int{1, 2, 2, 1}, nil},
		{"more than N changes within T hold the origin until stable for T",
			&decide.AntiFlapSpec{FlapChanges: 2, FlapWithin: 3},
			[][]vote.Verdict{all(U, U, U), all(D, U, U), all(U, U, U), all(D, U, U), all(U, U, U), all(U, U, U), all(U, U, U), all(U, U, U)},
			[]decide.Health{H, X, H, X, X, X, X, H}, []int{1, 1, 1, 1, 1, 1, 1, 1}, []int{4, -8}}, // the up at 5 is a change: stable from 5
		{"N changes spread wider than T do not hold",
			&decide.AntiFlapSpec{FlapChanges: 2, FlapWithin: 2},
			[][]vote.Verdict{all(U, U, U), all(D, U, U), all(N, U, U), all(U, U, U), all(N, U, U), all(D, U, U)},
			[]decide.Health{H, X, X, H, H, X}, []int{1, 1, 1, 1, 1, 1}, nil},
		{"changes during the hold move its end",
			&decide.AntiFlapSpec{FlapChanges: 1, FlapWithin: 2},
			[][]vote.Verdict{all(U, U, U), all(D, U, U), all(U, U, U), all(D, U, U), all(U, U, U), all(U, U, U), all(U, U, U)},
			[]decide.Health{H, X, X, X, X, X, H}, []int{1, 1, 1, 1, 1, 1, 1}, []int{3, -7}},
		{"without rules the core is today's",
			nil,
			[][]vote.Verdict{all(U, U, U), all(D, D, U), all(U, U, U)},
			[]decide.Health{H, X, H}, []int{1, 2, 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, st := antiSite(tt.af)
			a1, lvl, flaps := run(spec, st, tt.rounds)
			if !equal(a1, tt.a1) || !equal(lvl, tt.level) || !equal(flaps, tt.flaps) {
				t.Fatalf("a1 %v, levels %v, flaps %v; want %v, %v, %v", a1, lvl, flaps, tt.a1, tt.level, tt.flaps)
			}
			if tt.af == nil && st.AntiFlap != nil {
				t.Fatal("a site without rules keeps anti-flap memory")
			}
		})
	}
}

func equal[T comparable](a, b []T) bool {
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

// TestAntiFlapActions: disabling a held origin ends its hold with an event
// and starts its memory over; a manual switch clears the dwell.
func TestAntiFlapActions(t *testing.T) {
	spec, st := antiSite(&decide.AntiFlapSpec{FlapChanges: 1, FlapWithin: 5, Dwell: 5})
	run(spec, st, [][]vote.Verdict{{U, U, U}, {D, U, U}, {U, U, U}})
	if !st.AntiFlap.Origins[0].Held {
		t.Fatal("a1 is not held after two changes with changes = 1")
	}
	ev, err := decide.Disable(spec, st, "a1")
	if err != nil || len(ev) != 2 || ev[1].Kind != decide.KindOriginFlapping || ev[1].Flapping {
		t.Fatalf("disable of a held origin: %v, %v", ev, err)
	}
	if x := st.AntiFlap.Origins[0]; x.Raw != decide.Disabled || x.Held || x.QuarantineUntil != 0 || x.LastChange != 0 || len(x.Changes) != 0 {
		t.Fatalf("memory after disable: %+v", st.AntiFlap.Origins[0])
	}
	if ev, _ := decide.Enable(spec, st, "a1"); len(ev) != 1 || st.AntiFlap.Origins[0].Raw != decide.Unknown {
		t.Fatalf("enable: %v, %+v", ev, st.AntiFlap.Origins[0])
	}
	st.AntiFlap.LevelSince = 3
	st.Level = 2
	if _, err := decide.Switch(spec, st, 2); err != nil || st.AntiFlap.LevelSince != 3 {
		t.Fatalf("a switch to the current level changes the dwell: %v %+v", err, st.AntiFlap)
	}
	if _, err := decide.Switch(spec, st, 1); err != nil || st.AntiFlap.LevelSince != 0 {
		t.Fatalf("a manual switch keeps the dwell: %v %+v", err, st.AntiFlap)
	}
}

// TestOriginFlappingJSON: the event's shape, and that it reads back.
func TestOriginFlappingJSON(t *testing.T) {
	for _, on := range []bool{true, false} {
		ev := decide.Event{Kind: decide.KindOriginFlapping, Origin: "a1", Flapping: on}
		b, err := ev.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want := `{"kind":"origin_flapping","origin":"a1","flapping":` + map[bool]string{true: "true", false: "false"}[on] + `}`
		if string(b) != want {
			t.Fatalf("got %s, want %s", b, want)
		}
		var back decide.Event
		if err := back.UnmarshalJSON(b); err != nil || !reflect.DeepEqual(back, ev) {
			t.Fatalf("read back %+v, %v", back, err)
		}
	}
	var e decide.Event
	if err := e.UnmarshalJSON([]byte(`{"kind":"origin_flapping","origin":"a1"}`)); err == nil {
		t.Fatal("origin_flapping without flapping was accepted")
	}
}
