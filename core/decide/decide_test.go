package decide_test

import (
	"slices"
	"testing"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
)

const (
	U = vote.VerdictUp
	D = vote.VerdictDown
	N = vote.VerdictNone
)

func TestApplyVerdict(t *testing.T) {
	tests := []struct {
		name     string
		start    decide.OriginState
		verdicts []vote.Verdict
		want     decide.OriginState
	}{
		{"two ups make healthy", decide.OriginState{}, []vote.Verdict{U, U}, decide.OriginState{State: decide.Healthy, Successes: 2}},
		{"one up is not enough", decide.OriginState{}, []vote.Verdict{U}, decide.OriginState{State: decide.Unknown, Successes: 1}},
		{"three downs make unhealthy", decide.OriginState{State: decide.Healthy, Successes: 5}, []vote.Verdict{D, D, D}, decide.OriginState{State: decide.Unhealthy, Failures: 3}},
		{"a down resets successes", decide.OriginState{Successes: 1}, []vote.Verdict{D}, decide.OriginState{Failures: 1}},
		{"an up resets failures", decide.OriginState{State: decide.Healthy, Failures: 2}, []vote.Verdict{U}, decide.OriginState{State: decide.Healthy, Successes: 1}},
		{"none changes nothing", decide.OriginState{State: decide.Healthy, Failures: 2}, []vote.Verdict{N, N, N}, decide.OriginState{State: decide.Healthy, Failures: 2}},
		{"successes stop at the threshold", decide.OriginState{}, []vote.Verdict{U, U, U, U, U}, decide.OriginState{State: decide.Healthy, Successes: 2}},
		{"failures stop at the threshold", decide.OriginState{State: decide.Healthy}, []vote.Verdict{D, D, D, D, D, D}, decide.OriginState{State: decide.Unhealthy, Failures: 3}},
		{"alternating never reaches a threshold", decide.OriginState{State: decide.Healthy}, []vote.Verdict{D, U, D, U, D}, decide.OriginState{State: decide.Healthy, Failures: 1}},
		{"disabled ignores verdicts", decide.OriginState{State: decide.Disabled}, []vote.Verdict{U, U, U}, decide.OriginState{State: decide.Disabled}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.start
			for _, v := range tt.verdicts {
				decide.ApplyVerdict(&o, v, 2, 3)
			}
			if o != tt.want {
				t.Fatalf("got %+v, want %+v", o, tt.want)
			}
		})
	}
}

func TestLevelHealth(t *testing.T) {
	H, X, Q, Z := decide.Healthy, decide.Unhealthy, decide.Unknown, decide.Disabled
	tests := []struct {
		name   string
		states []decide.Health // origins a (level 1) and b (level 1)
		want   decide.Health
	}{
		{"any healthy", []decide.Health{H, X}, H},
		{"all unhealthy", []decide.Health{X, X}, X},
		{"unknown otherwise", []decide.Health{X, Q}, Q},
		{"disabled are left out", []decide.Health{Z, X}, X},
		{"no enabled origin is unhealthy", []decide.Health{Z, Z}, X},
		{"healthy beside disabled", []decide.Health{Z, H}, H},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := decide.NewSiteSpec("s", []decide.OriginSpec{{Name: "a", Level: 1}, {Name: "b", Level: 1}, {Name: "c", Level: 2}}, decide.FailbackAuto, 2, 3, true)
			st := decide.NewSiteState(spec, nil)
			st.Origins[0].State, st.Origins[1].State = tt.states[0], tt.states[1]
			levels := make([]decide.Health, 2)
			decide.LevelHealth(spec, st, levels)
			if levels[0] != tt.want {
				t.Fatalf("level health %s, want %s", levels[0], tt.want)
			}
		})
	}
}

// site builds a spec with one origin per given level number and a state
// whose origins have the given states.
func site(failback decide.Failback, levels []int, states []decide.Health) (*decide.SiteSpec, *decide.SiteState) {
	origins := make([]decide.OriginSpec, len(levels))
	for i, l := range levels {
		origins[i] = decide.OriginSpec{Name: string(rune('a' + i)), Level: l}
	}
	spec := decide.NewSiteSpec("s", origins, failback, 1, 1, true)
	st := decide.NewSiteState(spec, nil)
	for i, h := range states {
		st.Origins[i].State = h
	}
	return spec, st
}

func kinds(events []decide.Event) []string {
	out := []string{}
	for _, e := range events {
		switch e.Kind {
		case decide.KindLevelSwitched:
			out = append(out, e.Kind.String()+":"+string(rune('0'+e.FromLevel))+">"+string(rune('0'+e.ToLevel))+":"+e.Reason.String())
		case decide.KindFailbackAvailable, decide.KindAllLevelsUnhealthy:
			out = append(out, e.Kind.String()+":"+string(rune('0'+e.Level)))
		}
	}
	return out
}

func TestSwitching(t *testing.T) {
	H, X, Q := decide.Healthy, decide.Unhealthy, decide.Unknown
	tests := []struct {
		name     string
		failback decide.Failback
		hold     bool
		cur      int
		levels   []int
		states   []decide.Health // after the round (verdicts are none)
		baseline []decide.Health
		alerted  bool
		wantCur  int
		want     []string
	}{
		{"stay while current healthy", decide.FailbackAuto, false, 1, []int{1, 2}, []decide.Health{H, H}, nil, false, 1, []string{}},
		{"failover to next healthy", decide.FailbackAuto, false, 1, []int{1, 2, 3}, []decide.Health{X, Q, H}, nil, false, 3, []string{"level_switched:1>3:failover"}},
		{"failover to first unknown when none healthy", decide.FailbackAuto, false, 1, []int{1, 2, 3}, []decide.Health{X, X, Q}, nil, false, 3, []string{"level_switched:1>3:failover"}},
		{"failover searches below before wrapping", decide.FailbackManual, false, 2, []int{1, 2, 3}, []decide.Health{H, X, H}, []decide.Health{H, H, H}, false, 3, []string{"level_switched:2>3:failover"}},
		{"failover wraps to higher levels", decide.FailbackManual, false, 2, []int{1, 2, 3}, []decide.Health{H, X, X}, []decide.Health{H, H, H}, false, 1, []string{"level_switched:2>1:failover"}},
		{"automatic failback to highest healthy", decide.FailbackAuto, false, 3, []int{1, 2, 3}, []decide.Health{H, H, H}, nil, false, 1, []string{"level_switched:3>1:failback"}},
		{"failback skips unhealthy higher level", decide.FailbackAuto, false, 3, []int{1, 2, 3}, []decide.Health{X, H, H}, nil, false, 2, []string{"level_switched:3>2:failback"}},
		{"no failback while held", decide.FailbackAuto, true, 2, []int{1, 2}, []decide.Health{H, H}, []decide.Health{H, H}, false, 2, []string{}},
		{"all unhealthy alerts once", decide.FailbackAuto, false, 2, []int{1, 2}, []decide.Health{X, X}, nil, false, 2, []string{"all_levels_unhealthy:2"}},
		{"all unhealthy already alerted", decide.FailbackAuto, false, 2, []int{1, 2}, []decide.Health{X, X}, nil, true, 2, []string{}},
		{"manual notice on newly healthy", decide.FailbackManual, false, 2, []int{1, 2}, []decide.Health{H, H}, []decide.Health{X, H}, false, 2, []string{"failback_available:1"}},
		{"manual notice not repeated", decide.FailbackManual, false, 2, []int{1, 2}, []decide.Health{H, H}, []decide.Health{H, H}, false, 2, []string{}},
		{"manual notice before first round baseline unknown", decide.FailbackManual, false, 2, []int{1, 2}, []decide.Health{H, H}, nil, false, 2, []string{"failback_available:1"}},
		{"held auto site announces", decide.FailbackAuto, true, 2, []int{1, 2}, []decide.Health{H, H}, []decide.Health{Q, H}, false, 2, []string{"failback_available:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, st := site(tt.failback, tt.levels, tt.states)
			st.Level, st.ManualHold, st.Alerted = tt.cur, tt.hold, tt.alerted
			if tt.baseline != nil {
				st.Baseline = slices.Clone(tt.baseline)
			}
			verdicts := make([]vote.Verdict, len(tt.states))
			levels := make([]decide.Health, len(spec.Levels))
			got := kinds(decide.Round(spec, st, verdicts, levels, nil))
			if !slices.Equal(got, tt.want) || st.Level != tt.wantCur {
				t.Fatalf("events %v level %d, want %v level %d", got, st.Level, tt.want, tt.wantCur)
			}
			if !slices.Equal(st.Baseline, levels) {
				t.Fatalf("baseline %v not recorded as %v", st.Baseline, levels)
			}
		})
	}
}

func TestAlertRearmsAfterRecovery(t *testing.T) {
	spec, st := site(decide.FailbackAuto, []int{1, 1}, nil)
	levels := make([]decide.Health, 1)
	rounds := []struct {
		v    vote.Verdict
		want []string
	}{
		{D, []string{"all_levels_unhealthy:1"}},
		{D, []string{}},
		{U, []string{}},
		{D, []string{"all_levels_unhealthy:1"}},
	}
	for i, r := range rounds {
		got := kinds(decide.Round(spec, st, []vote.Verdict{r.v, r.v}, levels, nil))
		if !slices.Equal(got, r.want) {
			t.Fatalf("round %d: %v, want %v", i+1, got, r.want)
		}
	}
}

func TestActions(t *testing.T) {
	spec, st := site(decide.FailbackAuto, []int{1, 2}, []decide.Health{decide.Healthy, decide.Healthy})
	steps := []struct {
		name    string
		do      func() ([]decide.Event, error)
		wantErr string
		want    int // events
		check   func() bool
	}{
		{"switch to 2 sets hold", func() ([]decide.Event, error) { return decide.Switch(spec, st, 2) }, "", 1, func() bool { return st.Level == 2 && st.ManualHold }},
		{"switch to current pins, no event", func() ([]decide.Event, error) { return decide.Switch(spec, st, 2) }, "", 0, func() bool { return st.ManualHold }},
		{"unknown level refused", func() ([]decide.Event, error) { return decide.Switch(spec, st, 7) }, "site s has no level 7", 0, func() bool { return st.Level == 2 }},
		{"switch to top clears hold", func() ([]decide.Event, error) { return decide.Switch(spec, st, 1) }, "", 1, func() bool { return st.Level == 1 && !st.ManualHold }},
		{"disable", func() ([]decide.Event, error) { return decide.Disable(spec, st, "a") }, "", 1, func() bool { return st.Origins[0] == decide.OriginState{State: decide.Disabled} }},
		{"disable twice is a no-op", func() ([]decide.Event, error) { return decide.Disable(spec, st, "a") }, "", 0, nil},
		{"enable restarts unknown", func() ([]decide.Event, error) { return decide.Enable(spec, st, "a") }, "", 1, func() bool { return st.Origins[0] == decide.OriginState{} }},
		{"enable twice is a no-op", func() ([]decide.Event, error) { return decide.Enable(spec, st, "a") }, "", 0, nil},
		{"unknown origin refused", func() ([]decide.Event, error) { return decide.Disable(spec, st, "zz") }, "site s has no origin zz", 0, nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			ev, err := s.do()
			if s.wantErr != "" {
				if err == nil || err.Error() != s.wantErr {
					t.Fatalf("err %v, want %q", err, s.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if len(ev) != s.want {
				t.Fatalf("%d events %v, want %d", len(ev), ev, s.want)
			}
			if s.check != nil && !s.check() {
				t.Fatalf("state after: %+v", st)
			}
		})
	}
}
