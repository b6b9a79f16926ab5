package readmodel

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
)

// TestHiddenStates holds the site view to what it must show beside the
// level (issue 33, no hidden states): a failback waiting out its dwell, a
// manual failback waiting for an operator, the ramp's step of its steps
// and a running drill. The golden answers are the JSON of the view's
// waiting, ramp and drill fields.
func TestHiddenStates(t *testing.T) {
	at := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	auto := spec("www", decide.FailbackAuto, true, 1, 2)
	manual := spec("www", decide.FailbackManual, true, 1, 2)
	three := spec("www", decide.FailbackAuto, true, 1, 2, 3)
	ramped := spec("www", decide.FailbackAuto, true, 1, 2)
	ramped.AntiFlap = &decide.AntiFlapSpec{Ramp: &decide.RampSpec{Steps: []int{10, 50, 75, 100}, Interval: 1000}}
	paused := spec("www", decide.FailbackManual, false, 1, 2)

	cases := []struct {
		name string
		site func() Site
		want string
	}{
		{"dwell holds a healthy level 1", func() Site {
			s := site(auto, 2, []decide.Health{H, H}, H, H)
			s.DwellUntil = at.Add(40 * time.Second)
			return s
		}, `{"waiting":{"level":1,"why":"dwell","until":"2026-12-02T08:00:40Z","command":"vigil switch www 1"}}`},
		{"dwell over, level 1 not healthy yet", func() Site {
			s := site(auto, 2, []decide.Health{U, H}, U, H)
			s.DwellUntil = at
			return s
		}, `{}`},
		{"no dwell: the failback goes at the next round", func() Site {
			return site(auto, 2, []decide.Health{H, H}, H, H)
		}, `{}`},
		{"dwell while the current level is unhealthy: a failover, no wait", func() Site {
			s := site(three, 2, []decide.Health{H, X, H}, H, X, H)
			s.DwellUntil = at
			return s
		}, `{}`},
		{"manual failback waits", func() Site {
			return site(manual, 2, []decide.Health{H, H}, H, H)
		}, `{"waiting":{"level":1,"why":"manual","command":"vigil switch www 1"}}`},
		{"manual hold waits whatever the dwell", func() Site {
			s := site(auto, 2, []decide.Health{H, H}, H, H)
			s.ManualHold, s.DwellUntil = true, at
			return s
		}, `{"waiting":{"level":1,"why":"manual","command":"vigil switch www 1"}}`},
		{"manual on the top level waits for nothing", func() Site {
			return site(manual, 1, []decide.Health{H, H}, H, H)
		}, `{}`},
		{"the highest healthy level is named", func() Site {
			return site(spec("www", decide.FailbackManual, true, 1, 2, 3), 3, []decide.Health{X, H, H}, X, H, H)
		}, `{"waiting":{"level":2,"why":"manual","command":"vigil switch www 2"}}`},
		{"paused health checks wait for nothing", func() Site {
			return site(paused, 2, []decide.Health{H, H}, H, H)
		}, `{}`},
		{"ramp step 2 of 4", func() Site {
			s := site(ramped, 1, []decide.Health{H, H}, H, H)
			s.Ramp = &Ramp{From: 2, Weight: 50, NextAt: at}
			return s
		}, `{"ramp":{"from":2,"weight":50,"next_step_at":"2026-12-02T08:00:00Z","step":2,"steps":4}}`},
		{"ramp weight the steps no longer have", func() Site {
			s := site(ramped, 1, []decide.Health{H, H}, H, H)
			s.Ramp = &Ramp{From: 2, Weight: 30}
			return s
		}, `{"ramp":{"from":2,"weight":30}}`},
		{"a running drill", func() Site {
			s := site(auto, 1, []decide.Health{X, H}, X, H)
			s.Drill = &Drill{Level: 1, Started: at, Until: at.Add(2 * time.Minute), Actor: "ops"}
			return s
		}, `{"drill":{"level":1,"started":"2026-12-02T08:00:00Z","until":"2026-12-02T08:02:00Z","actor":"ops"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := At(&fake{sites: []Site{tc.site()}}, 0)
			b, err := json.Marshal(struct {
				Ramp    any `json:"ramp,omitempty"`
				Waiting any `json:"waiting,omitempty"`
				Drill   any `json:"drill,omitempty"`
			}{nilIfNil(v.Ramp), nilIfNil(v.Waiting), nilIfNil(v.Drill)})
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("got  %s\nwant %s", b, tc.want)
			}
		})
	}
}

// nilIfNil turns a typed nil pointer into a nil interface, so that
// omitempty leaves it out.
func nilIfNil[T any](p *T) any {
	if p == nil {
		return nil
	}
	return p
}
