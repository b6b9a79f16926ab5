package fleet

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
)

// Fast confirmation (docs/decisions.md, "Fast confirmation"): a site whose
// last verdicts went against its origins' states is "in doubt", and a site
// with health_check { confirm_interval } that is in doubt, or that a
// passive report made suspect, is probed again between rounds by a
// confirmation round: a round like any other (same chain, same decisions,
// its own sequence number) that probes only such sites. The fleet keeps
// the candidates and plans those rounds; when they run is the caller's
// (the engine's timer, or a timeline's "confirm" line).

// ConfirmInterval is the site's confirm_interval; 0 when it has none.
func (s *Site) ConfirmInterval() time.Duration {
	if s.Config == nil || s.Config.HealthCheck == nil {
		return 0
	}
	return s.Config.HealthCheck.ConfirmInterval
}

// InDoubt reports whether some enabled origin's last verdict went against
// its state and the thresholds have not yet settled it: down while
// healthy or unknown, or up while unhealthy with fewer than
// healthy_threshold successes in a row (an origin that has them but is
// held unhealthy by an anti-flap rule is not in doubt: probing it sooner
// changes nothing). A none verdict is never against a state.
func (s *Site) InDoubt() bool {
	for o, st := range s.State.Origins {
		switch v := s.Outcomes[o].Verdict; {
		case st.State == decide.Disabled:
		case v == vote.VerdictDown && (st.State == decide.Healthy || st.State == decide.Unknown):
			return true
		case v == vote.VerdictUp && st.State == decide.Unhealthy && st.Successes < s.Spec.HealthyThreshold:
			return true
		}
	}
	return false
}

// Suspected reports whether a confirmation was asked for the site
// (Fleet.Suspect) and no round has probed it since.
func (s *Site) Suspected() bool { return s.suspect }

// confirmable reports whether site i may have a confirmation: it has a
// confirm_interval, its health checks run, this fleet owns it, and it is
// in doubt or suspected.
func (f *Fleet) confirmable(i int) bool {
	s := f.Sites[i]
	return s.ConfirmInterval() > 0 && s.Eligible() && (f.Owns == nil || f.Owns(s.Spec.Name)) &&
		(s.suspect || s.InDoubt())
}

// noteDoubt lists site i among the candidates when it may be due a
// confirmation.
func (f *Fleet) noteDoubt(i int) {
	s := f.Sites[i]
	if !s.listed && f.confirmable(i) {
		s.listed = true
		f.doubt = append(f.doubt, i)
	}
}

// Suspect asks a confirmation of the named site, as a node's passive
// window that tripped does: the next confirmation round it is due at
// probes it, even if its verdicts are not in doubt. It reports false, and
// changes nothing, for a site that is unknown, has no confirm_interval,
// is paused or is not this fleet's.
func (f *Fleet) Suspect(name string) bool {
	i := f.SiteIndex(name)
	if i < 0 {
		return false
	}
	s := f.Sites[i]
	if s.ConfirmInterval() <= 0 || !s.Eligible() || (f.Owns != nil && !f.Owns(name)) {
		return false
	}
	s.suspect = true
	f.noteDoubt(i)
	return true
}

// Confirmable returns the indices (into Sites) of the sites that may be
// due a confirmation now or later: those with a confirm_interval that are
// in doubt or suspected. It drops the others from its list on the way.
// The slice is reused by the next call into the fleet.
func (f *Fleet) Confirmable() []int {
	kept := f.doubt[:0]
	for _, i := range f.doubt {
		if f.confirmable(i) {
			kept = append(kept, i)
		} else {
			f.Sites[i].listed = false
		}
	}
	clear(f.doubt[len(kept):])
	f.doubt = kept
	return f.doubt
}

// ConfirmPlan plans a confirmation round: of the Confirmable sites that
// due accepts (nil: every one), at most n, the most urgent first: probed
// longest ago first, ties by name, as the scheduler orders. deferred is
// how many due sites did not fit (Deferred names them): they stay
// candidates. The plan is nil when no site is due. Like Plan, it reuses
// the previous plan's buffers.
func (f *Fleet) ConfirmPlan(n int, due func(i int) bool) (p *Plan, deferred int) {
	f.deferred = nil
	f.cands = f.cands[:0]
	for _, i := range f.Confirmable() {
		if due == nil || due(i) {
			f.cands = append(f.cands, i)
		}
	}
	if len(f.cands) == 0 {
		return nil, 0
	}
	if len(f.cands) > n {
		slices.SortFunc(f.cands, func(a, b int) int {
			if c := cmp.Compare(f.Sites[a].LastProbed, f.Sites[b].LastProbed); c != 0 {
				return c
			}
			return cmp.Compare(a, b) // Sites is sorted by name
		})
		deferred = len(f.cands) - max(n, 0)
		f.deferred = f.cands[max(n, 0):]
		f.cands = f.cands[:max(n, 0)]
	}
	if len(f.cands) == 0 {
		return nil, deferred
	}
	p = &f.plan
	p.fleet, p.Seq = f, f.Seq+1
	p.Picked = append(p.Picked[:0], f.cands...)
	sort.Ints(p.Picked)
	p.All, p.Confirm = false, true
	f.fillJobs(p)
	return p, deferred
}

// Deferred returns the indices (into Sites) of the sites the last
// ConfirmPlan found due but left out for its budget, most urgent first;
// valid until the next call into the fleet.
func (f *Fleet) Deferred() []int { return f.deferred }

// Confirm runs one whole confirmation round at once: ConfirmPlan of at
// most ConfirmSites sites with every candidate due, Walk through src and
// Apply (what `vigil simulate` does for a timeline's "confirm" line).
// Reports are nil when no site was due.
func (f *Fleet) Confirm(ctx context.Context, src vote.Source) (reports []Report, deferred int) {
	p, deferred := f.ConfirmPlan(f.ConfirmSites, nil)
	if p == nil {
		return nil, deferred
	}
	p.Walk(ctx, src)
	return f.Apply(p), deferred
}
