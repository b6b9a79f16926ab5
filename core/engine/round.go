package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/vote"
	"github.com/vigilcdn/vigil/sdk"
)

// chainAsker is the vote.Source of a real round: it turns each source's
// share of the round into one batched ballot and keeps every vote for the
// status views.
type chainAsker struct {
	fleet   *fleet.Fleet
	sources []VoteSource
	log     hclog.Logger
	metrics *metrics // nil: not counted (vigil probe)
	round   uint64
	votes   map[vote.Target][]VoteView
}

func (a *chainAsker) Ask(ctx context.Context, source int, targets []vote.Target, counts []vote.Counts) {
	src := a.sources[source]
	name := a.fleet.Chain[source].Name
	ballot := sdk.Ballot{Round: a.round, Targets: make([]sdk.Target, len(targets))}
	index := make(map[[2]string]int, len(targets))
	for i, t := range targets {
		s := a.fleet.Sites[t.Site]
		o := s.Config.Origins[t.Origin]
		hc := s.Config.HealthCheck
		ballot.Targets[i] = sdk.Target{
			Site: s.Spec.Name, Origin: o.Name, Address: o.Address, Host: s.Config.Hostname,
			Path: hc.Path, Timeout: hc.Timeout, UserAgent: hc.UserAgent,
			Expect: sdk.Expectations{Statuses: hc.ExpectedStatus, BodyContains: hc.ExpectedBody, MaxLatency: hc.MaxLatency},
		}
		index[[2]string{s.Spec.Name, o.Name}] = i
	}
	votes, err := src.Vote(ctx, ballot)
	if err != nil {
		a.log.Warn("vote source failed this round; its origins pass on to the next source", "source", name, "targets", len(targets), "error", err)
		return
	}
	for _, v := range votes {
		i, ok := index[[2]string{v.Site, v.Origin}]
		if !ok {
			continue // the host already drops these; be safe
		}
		switch v.Value {
		case sdk.Up:
			counts[i].Up++
			if a.metrics != nil {
				a.metrics.votes.WithLabelValues(name, "up").Inc()
			}
		case sdk.Down:
			counts[i].Down++
			if a.metrics != nil {
				a.metrics.votes.WithLabelValues(name, "down").Inc()
			}
		default:
			continue
		}
		a.votes[targets[i]] = append(a.votes[targets[i]], VoteView{
			Source: name, Voter: v.Voter, Value: v.Value.String(), Reason: v.Reason.String(),
			Detail: v.Detail, LatencyMS: float64(v.Latency.Microseconds()) / 1000,
		})
	}
}

// RoundResult summarizes one round.
type RoundResult struct {
	Round    uint64
	Sites    []string
	Events   int
	Duration time.Duration
}

// RunRound runs one round now: the scheduler's sites, the chain, the
// decisions, one atomic commit, the publication and the views.
func (e *Engine) RunRound(ctx context.Context) RoundResult {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.active() {
		return RoundResult{Round: e.fleet.Seq}
	}
	start := e.opts.Now()
	asker := &chainAsker{fleet: e.fleet, sources: e.sources, log: e.log, metrics: e.metrics, round: e.fleet.Seq + 1, votes: map[vote.Target][]VoteView{}}
	reports := e.fleet.Round(ctx, asker)
	e.meta.Round = e.fleet.Seq
	res := RoundResult{Round: e.fleet.Seq, Sites: []string{}} // non-nil: refreshViews(nil) means every site
	for _, rep := range reports {
		s := rep.Site
		name := s.Spec.Name
		x := e.extra(name)
		x.lastProbedAt, x.lastRound = start, e.fleet.Seq
		x.lastEvents = append(x.lastEvents[:0], rep.Events...)
		idx := int32(e.fleet.SiteIndex(name))
		for i, o := range s.Spec.Origins {
			ox := x.origin(o.Name)
			if s.State.Origins[i].State == decide.Disabled {
				ox.votes = nil
				continue
			}
			ox.votes = asker.votes[vote.Target{Site: idx, Origin: int32(i)}]
			ox.reason = reasonOf(s, i, ox.votes, e.fleet.Chain)
			out := s.Outcomes[i]
			by := "none"
			if out.By >= 0 {
				by = e.fleet.Chain[out.By].Name
			}
			e.metrics.verdicts.WithLabelValues(by, out.Verdict.String()).Inc()
		}
		for _, ev := range rep.Events {
			if ev.Kind == decide.KindOriginState {
				x.origin(ev.Origin).since = start
			}
			e.addEvent(name, e.fleet.Seq, "", ev)
		}
		res.Events += len(rep.Events)
		e.dirty[name] = true
		res.Sites = append(res.Sites, name)
		e.observeSite(s)
	}
	e.republish()
	e.commitLocked(ctx)
	e.refreshViews(res.Sites)
	res.Duration = e.opts.Now().Sub(start)
	e.metrics.rounds.Inc()
	e.metrics.sitesProbed.Add(float64(len(res.Sites)))
	e.metrics.roundSeconds.Observe(res.Duration.Seconds())
	return res
}

// reasonOf summarizes why an origin got its verdict: the settling source's
// votes that agree with the verdict, or every vote when none settled.
func reasonOf(s *fleet.Site, i int, votes []VoteView, chain []fleet.ChainSource) string {
	out := s.Outcomes[i]
	if len(votes) == 0 {
		return "no votes"
	}
	want, source := "", ""
	if out.By >= 0 {
		want, source = out.Verdict.String(), chain[out.By].Name
	}
	seen := map[string]int{}
	var keys []string
	for _, v := range votes {
		if source != "" && (v.Source != source || v.Value != want) {
			continue
		}
		k := v.Source + ": " + v.Reason
		if v.Value == "down" && v.Detail != "" {
			k += " (" + v.Detail + ")"
		}
		if seen[k] == 0 {
			keys = append(keys, k)
		}
		seen[k]++
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for j, k := range keys {
		if seen[k] > 1 {
			parts[j] = fmt.Sprintf("%s x%d", k, seen[k])
		} else {
			parts[j] = k
		}
	}
	if out.By < 0 {
		return "unsettled: " + strings.Join(parts, "; ")
	}
	return strings.Join(parts, "; ")
}

// Run runs a round every round_interval until ctx ends. Rounds never
// overlap: a round that outlasts the interval delays the next one, which
// starts at once and is counted and logged as late.
func (e *Engine) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := e.opts.Now()
		res := e.RunRound(ctx)
		if ctx.Err() != nil {
			return
		}
		interval := e.Config().Control.RoundInterval
		elapsed := e.opts.Now().Sub(start)
		e.log.Debug("round done", "round", res.Round, "sites", len(res.Sites), "events", res.Events, "duration", elapsed)
		wait := interval - elapsed
		if wait < 0 {
			e.metrics.roundsLate.Inc()
			e.metrics.lateness.Observe((-wait).Seconds())
			e.log.Warn("round took longer than round_interval; the next round starts now, late",
				"round", res.Round, "duration", elapsed.Round(time.Millisecond), "round_interval", interval, "late_by", (-wait).Round(time.Millisecond))
			wait = 0
		}
		timer.Reset(wait)
	}
}
