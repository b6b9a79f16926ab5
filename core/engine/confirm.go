package engine

import (
	"time"
)

// Fast confirmation (docs/decisions.md, "Fast confirmation").
//
// A site with health_check { confirm_interval } whose last verdicts went
// against its origins' states, or that a plugin suspects (a node's passive
// window tripped: Suspect), is "in doubt" (fleet.Site.InDoubt). Between
// rounds, Run runs confirmation rounds: each probes the sites in doubt
// whose confirm_interval has passed since their last probe, at most
// control { confirm_budget } per cent of sites_per_round of them, the
// longest since their last probe first. A confirmation round is a round:
// its own sequence number, the same chain, decisions, commit, events,
// journal and history; only its metrics are its own
// (vigil_confirm_rounds_total and the like, not vigil_rounds_total).
//
// Bounds, so that confirmations never starve the rounds:
//   - confirmation rounds start at least the shortest confirm_interval
//     of the sites due apart, so they probe at most the budget per that
//     interval;
//   - none starts less than confirmMargin before the next round is due,
//     and one still running when that round is due is cut short: a round
//     is never delayed or shrunk by them;
//   - a site due that the budget leaves out waits for the next
//     confirmation round or the next round, and is counted
//     (vigil_confirm_deferred_total) and logged at most once a
//     round_interval.

// maxPendingSuspects bounds the suspicions waiting to be taken by the
// fleet; more are dropped and counted.
const maxPendingSuspects = 1 << 16

// confirmMargin is how long before the next round is due no confirmation
// round starts: a tenth of round_interval, at least 2s. It also keeps a
// recorded confirmation apart from a round in a history replay (which
// takes a recorded round less than round_interval, in whole seconds,
// after the round before it for a confirmation: docs/replay.md).
func confirmMargin(interval time.Duration) time.Duration {
	return max(2*time.Second, interval/10)
}

// Suspect asks a confirmation of site, as a node's passive window that
// tripped does: the site is probed by the next confirmation round it is
// due at (at most one a confirm_interval), though no round has found its
// verdicts in doubt. It never blocks and is safe from any goroutine; the
// suspicion is ignored for an unknown site, a site without
// confirm_interval, a paused one and one this instance does not own
// (vigil_confirm_suspects_total counts each result).
func (e *Engine) Suspect(site string) {
	e.suspectMu.Lock()
	if e.suspects == nil {
		e.suspects = map[string]struct{}{}
	}
	_, dup := e.suspects[site]
	full := !dup && len(e.suspects) >= maxPendingSuspects
	if !full {
		e.suspects[site] = struct{}{}
	}
	e.suspectMu.Unlock()
	if full {
		e.metrics.suspects.WithLabelValues("dropped").Inc()
		return
	}
	select {
	case e.confirmKick <- struct{}{}:
	default:
	}
}

// takeSuspectsLocked hands the waiting suspicions to the fleet. Called
// with e.mu held.
func (e *Engine) takeSuspectsLocked() {
	e.suspectMu.Lock()
	pending := e.suspects
	e.suspects = nil
	e.suspectMu.Unlock()
	for site := range pending {
		if e.fleet.Suspect(site) {
			e.metrics.suspects.WithLabelValues("accepted").Inc()
		} else {
			e.metrics.suspects.WithLabelValues("ignored").Inc()
		}
	}
}

// dueAt is the confirmation rounds' filter: site i is due when its
// confirm_interval has passed since its last probe at now (Unix
// nanoseconds). Called with e.mu held.
func (e *Engine) dueAt(now int64) func(i int) bool {
	return func(i int) bool {
		return e.info[i].probedAt+e.fleet.Sites[i].ConfirmInterval().Nanoseconds() <= now
	}
}

// nextConfirm says when Run's next confirmation round is due: when the
// first site in doubt is due, but no sooner than the shortest
// confirm_interval of those sites after the last confirmation round
// started (last), and not at all when that is less than confirmMargin
// before the next round (next; zero before the first round). ok is false
// when no confirmation round is due before the next round.
func (e *Engine) nextConfirm(next, last time.Time) (wait time.Duration, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.takeSuspectsLocked()
	if next.IsZero() || e.fleet == nil {
		return 0, false
	}
	var first int64
	var gap time.Duration
	for _, i := range e.fleet.Confirmable() {
		ci := e.fleet.Sites[i].ConfirmInterval()
		due := e.info[i].probedAt + ci.Nanoseconds()
		if gap == 0 || due < first {
			first = due
		}
		if gap == 0 || ci < gap {
			gap = ci
		}
	}
	if gap == 0 {
		return 0, false
	}
	at := time.Unix(0, first)
	if !last.IsZero() && at.Before(last.Add(gap)) {
		at = last.Add(gap)
	}
	if at.After(next.Add(-confirmMargin(e.cfg.Control.RoundInterval))) {
		return 0, false
	}
	return max(0, at.Sub(e.opts.Now())), true
}

// warnDeferred logs, at most once a round_interval, that a confirmation
// round left sites that were due out. Called with e.mu held.
func (e *Engine) warnDeferred(now time.Time, deferred int) {
	if now.Sub(e.deferWarned) < e.cfg.Control.RoundInterval {
		return
	}
	e.deferWarned = now
	e.log.Warn("more sites are due a confirmation than one confirmation round may probe: the rest wait for the next confirmation or round",
		"deferred", deferred, "budget", e.cfg.Control.ConfirmSites(),
		"fix", "nothing, if this is a wide incident; to confirm more at once raise control's confirm_budget (per cent of sites_per_round)")
}
