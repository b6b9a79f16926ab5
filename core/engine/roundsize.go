package engine

// sites_per_round = "auto": each round sized from the time the last
// rounds really took (docs/config.md, "sites_per_round = auto").

import (
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/sdk"
)

// RoundSample is one finished round as sites_per_round = "auto" sees it.
type RoundSample struct {
	// Sites is how many sites the round probed.
	Sites int
	// Duration is the round's time, votes and commit included.
	Duration time.Duration
	// OutOfTime is set when a source ran out of time in the round: some
	// of its targets got no vote from it.
	OutOfTime bool
}

const (
	// AutoRoundFloor is the fewest sites an auto-sized round is sized
	// to (fewer only when fewer are eligible): the default
	// sites_per_round, so that "auto" never probes less than a
	// configuration that leaves sites_per_round out.
	AutoRoundFloor = config.DefaultSitesPerRound
	// AutoRoundWindow is how many of the last rounds the rate is
	// measured over.
	AutoRoundWindow = 5
	// autoMarginNum/autoMarginDen is the part of the budget a round is
	// sized to fill: a quarter stays spare for a round slower than the
	// last ones.
	autoMarginNum, autoMarginDen = 3, 4
	// autoGrowth is how much larger than the last round's sites the next
	// round may be.
	autoGrowth = 2
)

// AutoRoundSize is the size of the next round under sites_per_round =
// "auto": recent are the last rounds, oldest first (only the last
// AutoRoundWindow count), budget the round's time budget
// (config.ChainBudget of round_interval) and eligible the sites this
// instance may probe (its share in sharded mode). The rule:
//
//   - no round yet: AutoRoundFloor;
//   - the last round ran over the budget, or a source ran out of time in
//     it: shrink at once, from that round alone, to 3/4 of the smaller of
//     its sites and its sites per second times the budget;
//   - otherwise: 3/4 of the sites per second of the window's rounds (their
//     sites over their time) times the budget, at most twice the last
//     round's sites (no limit from the rate when the rounds took no
//     measurable time);
//
// then never below AutoRoundFloor and never above eligible. It is a pure
// function: the same inputs give the same size.
func AutoRoundSize(recent []RoundSample, budget time.Duration, eligible int) int {
	size := AutoRoundFloor
	if n := len(recent); n > 0 {
		last := recent[n-1]
		if last.Duration > budget || last.OutOfTime {
			size = last.Sites
			if last.Duration > 0 {
				size = min(size, fit(last.Sites, last.Duration, budget))
			}
			size = size * autoMarginNum / autoMarginDen
		} else {
			var sites int
			var took time.Duration
			for _, r := range recent[max(0, n-AutoRoundWindow):] {
				sites += r.Sites
				took += r.Duration
			}
			size = last.Sites * autoGrowth
			if took > 0 {
				size = min(size, fit(sites, took, budget)*autoMarginNum/autoMarginDen)
			}
		}
		size = max(size, AutoRoundFloor)
	}
	return max(0, min(size, eligible))
}

// fit is how many sites fit in budget at sites per took, rounded down
// (and bounded, so that a round of a few microseconds cannot overflow).
func fit(sites int, took, budget time.Duration) int {
	const most = 1 << 40
	v := float64(sites) * float64(budget) / float64(took)
	if v >= most {
		return most
	}
	return int(v)
}

// planRoundLocked plans a round of sites_per_round sites, or with "auto"
// of the size AutoRoundSize gives for the last rounds, and shows the size
// in vigil_round_sites_limit. Called with e.mu held.
func (e *Engine) planRoundLocked(f *fleet.Fleet) *fleet.Plan {
	c := e.cfg.Control
	if !c.SitesPerRoundAuto {
		e.roundSize = f.SitesPerRound
		e.metrics.roundSize.Set(float64(e.roundSize))
		return f.Plan()
	}
	prev := e.roundSize
	budget := config.ChainBudget(c.RoundInterval)
	plan := f.PlanSized(func(eligible int) int {
		e.roundSize = AutoRoundSize(e.autoRounds, budget, eligible)
		return e.roundSize
	})
	e.metrics.roundSize.Set(float64(e.roundSize))
	if n := len(e.autoRounds); n > 0 && e.roundSize < prev {
		if last := e.autoRounds[n-1]; last.Duration > budget || last.OutOfTime {
			e.log.Info("sites_per_round auto: this round is smaller, the last one ran over its budget or a source ran out of time",
				"round", plan.Seq, "sites_per_round", e.roundSize, "was", prev, "last_sites", last.Sites,
				"last_duration", last.Duration.Round(time.Millisecond), "budget", budget, "out_of_time", last.OutOfTime)
		}
	}
	return plan
}

// noteRoundLocked keeps a round's sample for the next rounds' size, the
// last AutoRoundWindow of them (whatever sites_per_round says, so that a
// reload to "auto" starts from them). Called with e.mu held.
func (e *Engine) noteRoundLocked(res RoundResult, a *chainAsker) {
	out := false
	for _, ab := range a.abstained {
		out = out || ab[sdk.ReasonOutOfTime] > 0
	}
	if len(e.autoRounds) == AutoRoundWindow {
		e.autoRounds = append(e.autoRounds[:0], e.autoRounds[1:]...)
	}
	e.autoRounds = append(e.autoRounds, RoundSample{Sites: res.Probed, Duration: res.Duration, OutOfTime: out})
}
