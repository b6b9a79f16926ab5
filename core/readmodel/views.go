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
