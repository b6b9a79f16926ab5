package main

import (
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
)

// TestCardHiddenStates: the status card says what the site view carries
// beside the level: a failback waiting out its dwell, a ramp's step, a
// manual failback waiting for an operator and a running drill.
func TestCardHiddenStates(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	in := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	base := func() *api.SiteView {
		return &api.SiteView{Site: "www", Hostname: "www.example.net", Level: 2, Failback: "auto",
			Levels: map[string]string{"1": "healthy", "2": "healthy"}, Origins: map[string]api.OriginView{}}
	}
	cases := []struct {
		name string
		edit func(v *api.SiteView)
		want string
	}{
		{"dwell", func(v *api.SiteView) {
			v.Waiting = &api.WaitingView{Level: 1, Why: api.WaitingDwell, Until: in(40 * time.Second), Command: "vigil switch www 1"}
		}, "failback to level 1 in 40 s (dwell): level 1 is healthy; vigil switch www 1 fails back now"},
		{"dwell over", func(v *api.SiteView) {
			v.Waiting = &api.WaitingView{Level: 1, Why: api.WaitingDwell, Until: in(-time.Second), Command: "vigil switch www 1"}
		}, "failback to level 1 at the next round (dwell)"},
		{"manual", func(v *api.SiteView) {
			v.Failback = "manual"
			v.Waiting = &api.WaitingView{Level: 1, Why: api.WaitingManual, Command: "vigil switch www 1"}
		}, "manual failback waiting: level 1 is healthy; run vigil switch www 1"},
		{"ramp", func(v *api.SiteView) {
			v.Level = 1
			v.Ramp = &api.RampView{From: 2, Weight: 50, Step: 2, Steps: 4, NextStepAt: in(90 * time.Second)}
		}, "ramp step 2/4: 50% of new requests to level 1, the rest on level 2; next step in 1 min 30 s while level 1 is healthy"},
		{"drill", func(v *api.SiteView) {
			v.Drill = &api.SiteDrillView{Level: 1, Started: now, Until: in(time.Minute)}
		}, "drill of level 1 running, until "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := base()
			tc.edit(v)
			var b strings.Builder
			writeCard(&b, v, now)
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("card:\n%s\nwant a line with %q", b.String(), tc.want)
			}
		})
	}
	var b strings.Builder
	writeCard(&b, base(), now)
	for _, no := range []string{"dwell", "ramp", "manual failback", "drill"} {
		if strings.Contains(b.String(), no) {
			t.Errorf("a site with nothing waiting says %q:\n%s", no, b.String())
		}
	}
}
