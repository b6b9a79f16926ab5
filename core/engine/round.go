package engine

import (
	"context"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/vote"
	"github.com/vigilcdn/vigil/sdk"
)

// roundRecord is what one round leaves for the read side, in flat arrays
// shared by every site it probed: per site its events, per origin its
// outcome and its votes. Views point into the record of each site's last
// probed round, so a round allocates a handful of arrays, not a few
// objects per site.
type roundRecord struct {
	seq     uint64
	at      int64
	sites   []roundSite
	targets []roundTarget
	votes   []voteRecord
	events  []decide.Event
	// partitions are the suspected path partitions by site position, and
	// the groups the rule saw all down for the history; nil when the rule
	// did not run (partition.go).
	partitions map[int32][]partSuspect
}

type roundSite struct {
	firstTarget          uint32
	eventsFrom, eventsTo uint32
}

type roundTarget struct {
	out                vote.Outcome
	votesFrom, votesTo uint32
}

// castVote is one vote as the chain receives it: the target's position in
// the round (its index in the plan's flat outcome order) and the vote.
type castVote struct {
	target int32
	vote   voteRecord
}

// chainAsker is the vote.Source of a real round (and of a dry run): it
// turns each source's share of the round into one batched ballot, keeps
// every vote for the round record and counts them.
type chainAsker struct {
	fleet   *fleet.Fleet
	sources []VoteSource
	log     hclog.Logger
	round   uint64
	// flat maps a target to its position in the round; the positions of
	// one site's origins are consecutive.
	flat   func(vote.Target) int32
	intern *interner

	cast []castVote
	// tallies[source] counts the up and down votes received.
	tallies [][2]int
	// abstained[source] counts abstentions by reason.
	abstained []map[sdk.Reason]int
	// plugin[source] counts the votes with a plugin reason, by value and
	// plugin reason (vigil_vote_plugin_reasons_total).
	plugin []map[pluginReasonKey]int
	// asked[source] is true when the source got a ballot this round, and
	// errs[source] is its error when it failed to answer.
	asked []bool
	errs  []error
	// took[source] is the time the source's Vote calls took this round,
	// measured with now (nil: not measured, as in a probe).
	took []time.Duration
	now  func() time.Time
}

func newAsker(f *fleet.Fleet, sources []VoteSource, log hclog.Logger, round uint64, flat func(vote.Target) int32, in *interner) *chainAsker {
	return &chainAsker{fleet: f, sources: sources, log: log, round: round, flat: flat, intern: in,
		tallies: make([][2]int, len(sources)), abstained: make([]map[sdk.Reason]int, len(sources)),
		plugin: make([]map[pluginReasonKey]int, len(sources)),
		asked:  make([]bool, len(sources)), errs: make([]error, len(sources)), took: make([]time.Duration, len(sources))}
}

func (a *chainAsker) Ask(ctx context.Context, source int, targets []vote.Target, counts []vote.Counts) {
	src := a.sources[source]
	name, deadline := a.fleet.Chain[source].Name, a.fleet.Chain[source].Deadline
	ballot := sdk.Ballot{Round: a.round, Targets: make([]sdk.Target, len(targets))}
	// Votes come back by site and origin name. The walker hands one site's
	// origins in a row, so a site's first position and a short scan find
	// any of its origins.
	first := make(map[string]int, len(targets)/2+1)
	for i, t := range targets {
		s := a.fleet.Sites[t.Site]
		if _, ok := first[s.Spec.Name]; !ok {
			first[s.Spec.Name] = i
		}
		ballot.Targets[i] = target(s, int(t.Origin), deadline)
		if hc := s.Config.HealthCheck; hc.CAName != "" {
			if ballot.CAs == nil {
				ballot.CAs = map[string][]byte{}
			}
			ballot.CAs[hc.CAName] = hc.CA
		}
	}
	a.asked[source] = true
	var start time.Time
	if a.now != nil {
		start = a.now()
	}
	votes, err := src.Vote(ctx, ballot)
	if a.now != nil {
		a.took[source] += a.now().Sub(start)
	}
	ballot = sdk.Ballot{} // the targets are not needed any more: let them go
	if err != nil {
		a.errs[source] = err
		a.log.Warn("vote source failed this round; its origins pass on to the next source", "source", name, "targets", len(targets), "error", err)
		return
	}
	a.cast = slices.Grow(a.cast, len(votes))
	for _, v := range votes {
		i, ok := first[v.Site]
		if !ok {
			continue // the host already drops these; be safe
		}
		for i < len(targets) && a.name(targets[i]) == v.Site && a.origin(targets[i]) != v.Origin {
			i++
		}
		if i == len(targets) || a.name(targets[i]) != v.Site {
			continue
		}
		switch v.Value {
		case sdk.Up:
			counts[i].Up++
			a.tallies[source][0]++
		case sdk.Down:
			counts[i].Down++
			a.tallies[source][1]++
		case sdk.Abstain:
			// Never tallied; kept to be shown and counted.
			if a.abstained[source] == nil {
				a.abstained[source] = map[sdk.Reason]int{}
			}
			a.abstained[source][v.Reason]++
		default:
			continue
		}
		plugin := theReasons.number(v.PluginReason)
		if v.PluginReason != "" {
			if a.plugin[source] == nil {
				a.plugin[source] = map[pluginReasonKey]int{}
			}
			a.plugin[source][pluginReasonKey{v.Value, v.PluginReason}]++
			if plugin == 0 { // past the table's bound: kept as text
				v.Detail = joinDetail(v.PluginReason, v.Detail)
			}
		}
		a.cast = append(a.cast, castVote{target: a.flat(targets[i]), vote: voteRecord{
			voter: a.intern.get(v.Voter), detail: a.intern.get(v.Detail), latency: micros(v.Latency),
			source: uint8(source), value: uint8(v.Value), reason: uint8(v.Reason), plugin: plugin, http: v.HTTP,
		}})
	}
}

func (a *chainAsker) name(t vote.Target) string { return a.fleet.Sites[t.Site].Spec.Name }
func (a *chainAsker) origin(t vote.Target) string {
	return a.fleet.Sites[t.Site].Spec.Origins[t.Origin].Name
}

// target is what a source is told of one origin of s: everything its
// probe needs, the probe timeout fitted to the source's deadline.
func target(s *fleet.Site, origin int, deadline time.Duration) sdk.Target {
	o := s.Config.Origins[origin]
	hc := s.Config.HealthCheck
	return sdk.Target{
		Site: s.Spec.Name, Origin: o.Name, Address: o.Address, Host: s.Config.Hostname,
		Path: hc.Path, Timeout: hc.ProbeTimeout(deadline), UserAgent: hc.UserAgent,
		Expect:          sdk.Expectations{Statuses: hc.ExpectedStatus, BodyContains: hc.ExpectedBody, MaxLatency: hc.MaxLatency},
		TLS:             sdk.TLSSettings{ServerName: hc.TLSServerName, CA: hc.CAName, InsecureSkipVerify: hc.InsecureSkipTLSVerify},
		Headers:         hc.Headers,
		FollowRedirects: hc.FollowRedirects,
		MaxBody:         hc.MaxBody,
	}
}

// count adds the round's votes and abstentions to the metrics and, for a
// real round, logs once per source how many targets it left unjudged
// because it ran out of time.
func (a *chainAsker) count(m *metrics, logCut bool) {
	for source, t := range a.tallies {
		name := a.fleet.Chain[source].Name
		if a.asked[source] && a.now != nil {
			m.sourceSeconds.WithLabelValues(name).Observe(a.took[source].Seconds())
		}
		m.votes.WithLabelValues(name, "up").Add(float64(t[0]))
		m.votes.WithLabelValues(name, "down").Add(float64(t[1]))
		for reason, n := range a.abstained[source] {
			m.abstentions.WithLabelValues(name, reason.String()).Add(float64(n))
		}
		for k, n := range a.plugin[source] {
			m.countPluginReason(name, k, n)
		}
		if n := a.abstained[source][sdk.ReasonOutOfTime]; n > 0 && logCut {
			a.log.Warn("a source ran out of time this round: these targets got no vote from it",
				"source", name, "round", a.round, "out_of_time", n,
				"fix", "raise the source's timeout (or round_interval, from which the default follows), lower the sites' health_check timeout, or raise the plugin's concurrency")
		}
	}
}

func micros(d time.Duration) int32 {
	us := d.Microseconds()
	switch {
	case us > 1<<31-1:
		return 1<<31 - 1
	case us < 0:
		return 0
	}
	return int32(us)
}

// grouped returns the votes ordered by target position, and for each of
// the n positions the start of its votes (starts[n] is the end).
func (a *chainAsker) grouped(n int) (votes []voteRecord, starts []uint32) {
	starts = make([]uint32, n+1)
	for _, c := range a.cast {
		starts[c.target+1]++
	}
	for i := 1; i <= n; i++ {
		starts[i] += starts[i-1]
	}
	votes = make([]voteRecord, len(a.cast))
	next := append([]uint32(nil), starts[:n]...)
	for _, c := range a.cast {
		votes[next[c.target]] = c.vote
		next[c.target]++
	}
	return votes, starts
}

// interner shares the strings that votes repeat round after round (voter
// ids, details such as "HTTP 200 OK"), so that a round record holds one
// copy of each. It forgets everything when it grows past its bound.
type interner struct{ m map[string]string }

const internerLimit = 8192

func (in *interner) get(s string) string {
	if in == nil || s == "" {
		return s
	}
	if v, ok := in.m[s]; ok {
		return v
	}
	if in.m == nil || len(in.m) >= internerLimit {
		in.m = make(map[string]string, 256)
	}
	in.m[s] = s
	return s
}

// RoundResult summarizes one round.
type RoundResult struct {
	Round uint64
	// Probed is the number of sites the round probed.
	Probed int
	Events int
	// Discarded is set when the configuration was reloaded (or the state
	// refreshed from the store) while the round asked its sources: its
	// votes were for sites as they were, so nothing of it was applied.
	Discarded bool
	// Saved is false when the round's changes could not be committed:
	// they stay pending, and nothing of them was published.
	Saved    bool
	Duration time.Duration
	// Confirm is set for a confirmation round (RunConfirm); Probed is 0
	// when no site was due.
	Confirm bool
	// Takeover is set for a takeover round (RunTakeover); Probed is 0
	// when no claimed site awaited its first probe.
	Takeover bool
	// Claimed is how many of the probed sites were claimed (Claim) and
	// not probed by this instance since: a takeover round's sites, or
	// those a round took in as it started.
	Claimed int
}

// RunRound runs one round now: the scheduler's sites, the chain, the
// decisions, one atomic commit, then the publication and the views. The
// engine's lock is not held while the sources vote (see the package doc).
func (e *Engine) RunRound(ctx context.Context) RoundResult {
	return e.runRound(ctx, false, false)
}

// RunConfirm runs one confirmation round now (confirm.go): the sites in
// doubt whose confirm_interval has passed since their last probe, at most
// control { confirm_budget } of them, through the same chain, decisions
// and commit as a round. It probes nothing, and takes no sequence number,
// when no site is due.
func (e *Engine) RunConfirm(ctx context.Context) RoundResult {
	return e.runRound(ctx, true, false)
}

// RunTakeover runs one takeover round now (claim.go): the sites this
// instance claimed (Claim) and owns that none of its rounds has probed
// since, at most sites_per_round of them, longest ago first, through the
// same chain, decisions and commit as a round. It probes nothing, and
// takes no sequence number, when no claimed site awaits its first probe.
func (e *Engine) RunTakeover(ctx context.Context) RoundResult {
	return e.runRound(ctx, false, true)
}

func (e *Engine) runRound(ctx context.Context, confirm, takeover bool) RoundResult {
	e.roundMu.Lock()
	defer e.roundMu.Unlock()

	e.mu.Lock()
	e.takeLoadsLocked(ctx) // claimed sites are planned as stored
	if !e.active() {
		// A standby forgets the rounds it timed: once active, another
		// instance's rounds came between (sites_per_round = "auto").
		e.autoRounds = e.autoRounds[:0]
		res := RoundResult{Round: e.fleet.Seq, Saved: true, Confirm: confirm}
		e.mu.Unlock()
		return res
	}
	f, gen, sources := e.fleet, e.gen, e.sources
	start := e.opts.Now()
	var plan *fleet.Plan
	if confirm {
		e.takeSuspectsLocked()
		var deferred int
		plan, deferred = f.ConfirmPlan(e.cfg.Control.ConfirmSites(), e.dueAt(nanos(start)))
		if deferred > 0 {
			e.metrics.confirmDeferred.Add(float64(deferred))
			e.warnDeferred(start, deferred)
		}
		if plan == nil {
			res := RoundResult{Round: f.Seq, Saved: true, Confirm: true}
			e.mu.Unlock()
			return res
		}
	} else if takeover {
		if plan = f.PlanSites(e.freshSites(false)); plan == nil {
			res := RoundResult{Round: f.Seq, Saved: true, Takeover: true}
			e.mu.Unlock()
			return res
		}
	} else {
		plan = e.planRoundLocked(f)
	}
	pos := e.planPositions(f, plan)
	asker := newAsker(f, sources, e.log, plan.Seq, func(t vote.Target) int32 { return pos[t.Site] + t.Origin }, &e.intern)
	asker.now = e.opts.Now
	e.inFlight = plan
	e.mu.Unlock()

	plan.Walk(ctx, asker)
	if ctx.Err() == nil {
		e.trouble.note(f.Chain, asker, e.opts.Now())
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	// What was claimed while this round committed is taken in before the
	// lock is let go (claim.go).
	defer e.takeLoadsLocked(ctx)
	e.inFlight = nil
	res := RoundResult{Round: plan.Seq, Confirm: confirm, Takeover: takeover}
	if e.gen != gen {
		e.log.Info("round discarded: the configuration or the state changed while its sources voted; the next round starts now", "round", plan.Seq, "confirm", confirm)
		res.Discarded = true
		if !confirm && !takeover {
			e.retryNow = true
		}
		return res
	}
	if !e.active() {
		res.Saved = true
		return res
	}
	drilled := e.drillVotesLocked(f, plan, asker, start) // drill.go
	reports := f.Apply(plan)
	e.meta.Round = f.Seq
	e.drillMarkLocked(drilled, reports)
	e.recordRound(f, plan, reports, asker, nanos(start))
	e.drillAfterLocked(drilled, reports, plan.Seq, start)
	asker.count(e.metrics, true)
	for _, rep := range reports {
		res.Events += len(rep.Events)
	}
	res.Probed = len(reports)
	res.Claimed = e.probedFresh(func(yield func(string) bool) {
		for _, rep := range reports {
			if !yield(rep.Site.Spec.Name) {
				return
			}
		}
	})
	e.roundOwed = unsaved{seq: plan.Seq, probed: res.Probed, confirm: confirm}
	res.Saved = e.flushLocked(ctx)
	res.Duration = e.opts.Now().Sub(start)
	if confirm {
		e.metrics.confirmRounds.Inc()
		e.metrics.confirmSites.Add(float64(len(reports)))
		e.metrics.confirmSeconds.Observe(res.Duration.Seconds())
		return res
	}
	if takeover {
		e.metrics.sitesProbed.Add(float64(len(reports)))
		return res
	}
	e.freshSites(true) // those released before their first probe
	e.noteRoundLocked(res, asker)
	e.metrics.rounds.Inc()
	e.metrics.sitesProbed.Add(float64(len(reports)))
	e.metrics.roundSeconds.Observe(res.Duration.Seconds())
	return res
}

// planPositions returns, by fleet index, the position of each picked
// site's first origin in the plan's flat outcome order.
func (e *Engine) planPositions(f *fleet.Fleet, plan *fleet.Plan) []int32 {
	if cap(e.posBuf) < len(f.Sites) {
		e.posBuf = make([]int32, len(f.Sites))
	}
	pos := e.posBuf[:len(f.Sites)]
	at := int32(0)
	for j, i := range plan.Picked {
		pos[i] = at
		at += int32(len(plan.Jobs[j].Outcomes))
	}
	return pos
}

// recordRound takes an applied round into the engine: the round record
// for the views, each probed site's info and events, what must be
// written, and the scheduler's probe marks. Called with e.mu held.
func (e *Engine) recordRound(f *fleet.Fleet, plan *fleet.Plan, reports []fleet.Report, asker *chainAsker, at int64) {
	total := 0
	for _, j := range plan.Jobs {
		total += len(j.Outcomes)
	}
	votes, starts := asker.grouped(total)
	pos := e.posBuf
	rec := &roundRecord{seq: plan.Seq, at: at, votes: votes,
		sites: make([]roundSite, 0, len(reports)), targets: make([]roundTarget, 0, total)}
	var ev int
	for _, rep := range reports {
		ev += len(rep.Events)
	}
	rec.events = make([]decide.Event, 0, ev)
	for _, rep := range reports {
		s, i := rep.Site, rep.Index
		x := &e.info[i]
		x.probedAt = at
		rs := roundSite{firstTarget: uint32(len(rec.targets)), eventsFrom: uint32(len(rec.events))}
		for o := range s.Outcomes {
			flat := pos[i] + int32(o)
			t := roundTarget{out: s.Outcomes[o]}
			if !t.out.Skip {
				t.votesFrom, t.votesTo = starts[flat], starts[flat+1]
			} else {
				t.votesFrom, t.votesTo = starts[flat], starts[flat]
			}
			rec.targets = append(rec.targets, t)
			by := "none"
			if t.out.By >= 0 {
				by = f.Chain[t.out.By].Name
			}
			if !t.out.Skip {
				e.verdictCounts[verdictKey{by, t.out.Verdict}]++
				e.noteVerdict(s, o, t.out.Verdict, at) // failover_times.go
			}
		}
		siteEvents := e.partitionEvents(f, rec, &rs, s, rep.Events, at)
		siteEvents = e.rampEvents(s, siteEvents) // ramp_events.go
		for _, ev := range siteEvents {
			if ev.Kind == decide.KindOriginState {
				if oi := s.Spec.OriginIndex(ev.Origin); oi >= 0 {
					t := &rec.targets[rs.firstTarget+uint32(oi)]
					x.origins[oi].since = at
					x.origins[oi].cause = e.intern.get(reasonOf(t.out, votes[t.votesFrom:t.votesTo], f.Chain))
				}
			}
			e.addEvent(s.Spec.Name, plan.Seq, "", ev, timeOf(at))
			e.noteSwitch(s, ev, siteEvents, e.meta.LastEvent, plan.Seq, at) // failover_times.go
		}
		rec.events = append(rec.events, siteEvents...)
		rs.eventsTo = uint32(len(rec.events))
		e.last[i] = lastRef{rec: rec, site: int32(len(rec.sites))}
		rec.sites = append(rec.sites, rs)
		e.touch(i)
		if !plan.All {
			e.markProbed(i)
		}
	}
	if plan.All {
		e.meta.ProbedAll, e.meta.ProbedAllAt = plan.Seq, timeOf(at)
		e.clearProbeMarks()
	}
	for k, n := range e.verdictCounts {
		e.metrics.verdicts.WithLabelValues(k.by, k.verdict.String()).Add(float64(n))
		delete(e.verdictCounts, k)
	}
	e.lastChanged = true
}

type verdictKey struct {
	by      string
	verdict vote.Verdict
}

// Run runs a round every round_interval until ctx ends, and between
// rounds the confirmation rounds that sites in doubt are due (confirm.go).
// Rounds never overlap: a round that outlasts the interval delays the next
// one, which starts at once and is counted and logged as late. A
// confirmation never delays a round: none starts less than confirmMargin
// before the next round is due, and one that is still running when that
// round is due is cut short (its sources' votes not in by then are lost,
// as in a round that runs out of time). Sites claimed in sharded mode
// (Claim) get a takeover round at once on the same terms (claim.go).
func (e *Engine) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	confirmTimer := time.NewTimer(time.Hour)
	confirmTimer.Stop()
	defer confirmTimer.Stop()
	var next time.Time        // when the next round is due
	var lastConfirm time.Time // when the last confirmation round started
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			start := e.opts.Now()
			res := e.RunRound(ctx)
			if ctx.Err() != nil {
				return
			}
			if e.opts.AfterRound != nil {
				e.opts.AfterRound(res)
			}
			interval := e.Config().Control.RoundInterval
			elapsed := e.opts.Now().Sub(start)
			e.log.Debug("round done", "round", res.Round, "sites", res.Probed, "events", res.Events, "duration", elapsed)
			if res.Claimed > 0 {
				e.log.Info("round probed sites claimed since the last one", "round", res.Round, "claimed", res.Claimed, "sites", res.Probed)
			}
			wait := interval - elapsed
			if e.takeRetryNow() {
				wait = 0
			} else if wait < 0 {
				e.metrics.roundsLate.Inc()
				e.metrics.lateness.Observe((-wait).Seconds())
				e.log.Warn("round took longer than round_interval; the next round starts now, late",
					"round", res.Round, "duration", elapsed.Round(time.Millisecond), "round_interval", interval, "late_by", (-wait).Round(time.Millisecond))
				wait = 0
			}
			timer.Reset(wait)
			next = e.opts.Now().Add(wait)
		case <-confirmTimer.C:
			lastConfirm = e.opts.Now()
			cctx, cancel := context.WithDeadline(ctx, next)
			res := e.RunConfirm(cctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if res.Probed > 0 {
				if e.opts.AfterRound != nil {
					e.opts.AfterRound(res)
				}
				e.log.Debug("confirmation round done", "round", res.Round, "sites", res.Probed, "events", res.Events, "duration", res.Duration)
			}
		case <-e.confirmKick:
		case <-e.loads.kick:
			// Loads wait for the engine (claim.go), or claimed sites
			// for their first probe: a takeover round, unless the next
			// round is about to come (it probes them then).
			e.TakeLoads(ctx)
			interval := e.Config().Control.RoundInterval
			if next.IsZero() || !e.opts.Now().Add(confirmMargin(interval)).Before(next) {
				break
			}
			tctx, cancel := context.WithDeadline(ctx, next)
			res := e.RunTakeover(tctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if res.Probed > 0 {
				if e.opts.AfterRound != nil {
					e.opts.AfterRound(res)
				}
				e.log.Info("takeover round done: claimed sites probed before the next round", "round", res.Round, "claimed", res.Claimed, "events", res.Events, "duration", res.Duration)
				if res.Probed >= e.Config().Control.SitesPerRound {
					e.kickLoads() // more may wait: another, until the next round is near
				}
			}
		}
		if d, ok := e.nextConfirm(next, lastConfirm); ok {
			confirmTimer.Reset(d)
		} else {
			confirmTimer.Stop()
		}
	}
}

func (e *Engine) takeRetryNow() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.retryNow
	e.retryNow = false
	return r
}
