package readmodel

import (
	"sort"
	"strconv"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
)

// SiteView builds the named site's view, or returns nil when the snapshot
// has no such site. The view is the caller's to keep.
func SiteView(s Snapshot, name string) *api.SiteView {
	i := s.Index(name)
	if i < 0 {
		return nil
	}
	return At(s, i)
}

// At builds the view of the site at position i (GET /v1/sites/{site} and
// each entry of GET /v1/sites).
func At(s Snapshot, i int) *api.SiteView {
	var site Site
	s.Fill(i, &site)
	_, pub := s.Commit()
	spec := site.Spec
	out := &api.SiteView{
		Round:             site.Round,
		Site:              spec.Name,
		Hostname:          site.Hostname,
		Level:             site.Level,
		Failback:          spec.Failback.String(),
		ManualHold:        site.ManualHold,
		EffectiveFailback: decide.EffectiveFailback(spec, &decide.SiteState{ManualHold: site.ManualHold}).String(),
		Thresholds:        api.Thresholds{Unhealthy: spec.UnhealthyThreshold, Healthy: spec.HealthyThreshold},
		Levels:            make(map[string]string, len(spec.Levels)),
		Origins:           make(map[string]api.OriginView, len(spec.Origins)),
		Events:            Events(site.Events),
		Probing:           "active",
		Status:            site.Status(),
		Publication:       pub,
		Ramp:              rampView(site.Ramp),
	}
	if out.Events == nil {
		out.Events = []api.Event{} // written as [], never null
	}
	out.Waiting = waitingView(&site, out.EffectiveFailback)
	if out.Ramp != nil {
		out.Ramp.Step, out.Ramp.Steps = rampStep(spec, out.Ramp.Weight)
	}
	if d := site.Drill; d != nil {
		out.Drill = &api.SiteDrillView{Level: d.Level, Started: d.Started, Until: timePtr(d.Until), Actor: d.Actor}
	}
	out.LastProbe = timePtr(site.ProbedAt)
	enabled := 0
	for _, o := range site.Origins {
		if o.State != decide.Disabled {
			enabled++
		}
	}
	switch {
	case !spec.HealthCheck:
		out.Probing, out.PausedWhy = "paused", "health check disabled"
	case enabled < 2:
		out.Probing, out.PausedWhy = "paused", "fewer than two enabled origins"
	}
	for li, l := range spec.Levels {
		out.Levels[strconv.Itoa(l)] = site.Levels[li].String()
	}
	for oi, o := range spec.Origins {
		st, os := &site.Origins[oi], &site.Details[oi]
		ov := api.OriginView{
			State: st.State.String(), Failures: st.Failures, Successes: st.Successes, Verdict: vote.VerdictNone.String(),
			Asked: []string{}, Votes: []api.VoteView{}, Level: o.Level, Address: os.Address, Reason: os.Cause,
			Since: timePtr(os.Since),
		}
		if site.Probed && st.State != decide.Disabled {
			ov.Verdict = os.Verdict.String()
			if len(os.Asked) > 0 {
				ov.Asked = os.Asked
			}
			if os.By != "" {
				by := os.By
				ov.By = &by
			}
			if len(os.Votes) > 0 {
				ov.Votes = make([]api.VoteView, len(os.Votes))
				for j, v := range os.Votes {
					ov.Votes[j] = voteView(v)
				}
			}
			ov.Reason = os.Reason
		}
		if os.Flapping {
			ov.Flapping, ov.FlappingSince, ov.FlappingUntil = true, timePtr(os.FlappingSince), timePtr(os.FlappingUntil)
		}
		ov.QuarantineUntil = timePtr(os.QuarantineUntil)
		for _, p := range os.Partitions {
			ov.Partitions = append(ov.Partitions, api.PartitionView{Group: p.Group, Rounds: p.Rounds, Since: p.Since})
		}
		if len(ov.Partitions) > 1 {
			sort.Slice(ov.Partitions, func(a, b int) bool { return ov.Partitions[a].Group < ov.Partitions[b].Group })
		}
		out.Origins[o.Name] = ov
	}
	return out
}

// VoteView is a vote as the API shows it (a site's view, a probe's
// answer).
func VoteView(v Vote) api.VoteView { return voteView(v) }

func voteView(v Vote) api.VoteView {
	return api.VoteView{
		Source: v.Source, Voter: v.Voter, Value: v.Value.String(), Reason: v.Reason.String(),
		PluginReason: v.PluginReason, Detail: v.Detail, LatencyMS: float64(v.Latency.Microseconds()) / 1000,
	}
}

func rampView(r *Ramp) *api.RampView {
	if r == nil {
		return nil
	}
	return &api.RampView{From: r.From, Weight: r.Weight, NextStepAt: timePtr(r.NextAt)}
}

// timePtr is t, or nil for the zero time.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	p := new(time.Time) // only now: &t would put every t on the heap
	*p = t
	return p
}

// waitingView is the failback that waits on a site, or nil: the highest
// healthy level above the current one, when the site stays for the
// failback dwell (automatic failback) or for an operator (manual). A
// site whose health checks are paused, or whose current level is
// unhealthy (it fails over, it does not wait), waits for nothing.
func waitingView(site *Site, effective string) *api.WaitingView {
	spec := site.Spec
	if !spec.HealthCheck {
		return nil
	}
	cur := -1
	for i, l := range spec.Levels {
		if l == site.Level {
			cur = i
		}
	}
	if cur <= 0 || cur >= len(site.Levels) {
		return nil
	}
	above := -1
	for i := 0; i < cur; i++ {
		if site.Levels[i] == decide.Healthy {
			above = i
			break
		}
	}
	if above < 0 {
		return nil
	}
	w := &api.WaitingView{Level: spec.Levels[above], Command: "vigil switch " + spec.Name + " " + strconv.Itoa(spec.Levels[above])}
	switch {
	case effective == decide.FailbackManual.String():
		w.Why = api.WaitingManual
	case !site.DwellUntil.IsZero() && site.Levels[cur] != decide.Unhealthy:
		w.Why, w.Until = api.WaitingDwell, timePtr(site.DwellUntil)
	default:
		return nil // an automatic failback goes at the next round
	}
	return w
}

// rampStep is the place of weight among the site's configured ramp steps:
// step (from 1) of steps; 0, 0 when the configuration has no such step.
func rampStep(spec *decide.SiteSpec, weight int) (step, steps int) {
	if spec.AntiFlap == nil || spec.AntiFlap.Ramp == nil {
		return 0, 0
	}
	for i, w := range spec.AntiFlap.Ramp.Steps {
		if w == weight {
			return i + 1, len(spec.AntiFlap.Ramp.Steps)
		}
	}
	return 0, 0
}
