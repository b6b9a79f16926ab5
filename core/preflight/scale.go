package preflight

import (
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
)

// Scale is how long the scheduler takes to probe every site once, when
// the enabled sites outnumber sites_per_round: each round probes up to
// sites_per_round of them, those probed longest ago first, so a site is
// probed once every Rounds rounds and an origin that fails needs about
// UnhealthyThreshold such cycles to be found unhealthy.
type Scale struct {
	// Sites is the number of sites the scheduler may probe: health check
	// enabled and at least two enabled origins (those of the whole
	// configuration: in sharded mode each instance probes its share).
	Sites int
	// PerRound is sites_per_round.
	PerRound int
	// Rounds is ceil(Sites / PerRound): the rounds of a full cycle.
	Rounds int
	// Cycle is Rounds x round_interval: how often each site is probed.
	Cycle time.Duration
	// UnhealthyThreshold is the largest unhealthy_threshold of the sites.
	UnhealthyThreshold int
	// Detection is Cycle x UnhealthyThreshold: roughly how long a failed
	// origin takes to be found unhealthy (a failover follows).
	Detection time.Duration
	// Sharded is set in sharded mode, where Sites is the whole fleet's
	// and each instance probes only its share.
	Sharded bool
	// Auto is set with sites_per_round = "auto": PerRound is then the
	// size the rounds start at (and never go below), and Cycle and
	// Detection are the longest they can be; the engine grows the rounds
	// from the time they take, up to every site (Budget is that time).
	Auto   bool
	Budget time.Duration
}

// ScaleOf returns the scheduler's cycle for cfg, and whether it exceeds
// one round (more eligible sites than sites_per_round).
func ScaleOf(cfg *config.Config) (Scale, bool) {
	c := cfg.Control
	s := Scale{PerRound: c.SitesPerRound, UnhealthyThreshold: 1,
		Sharded: c.Store != nil && c.Store.Mode == config.ModeSharded,
		Auto:    c.SitesPerRoundAuto, Budget: config.ChainBudget(c.RoundInterval)}
	for _, site := range cfg.Sites {
		if site.HealthCheck == nil || !site.HealthCheck.Enabled {
			continue
		}
		enabled := 0
		for _, o := range site.Origins {
			if o.Enabled {
				enabled++
			}
		}
		if enabled < 2 {
			continue
		}
		s.Sites++
		s.UnhealthyThreshold = max(s.UnhealthyThreshold, site.HealthCheck.UnhealthyThreshold)
	}
	if s.PerRound <= 0 {
		return s, false
	}
	s.Rounds = (s.Sites + s.PerRound - 1) / s.PerRound
	s.Cycle = time.Duration(max(1, s.Rounds)) * c.RoundInterval
	s.Detection = s.Cycle * time.Duration(s.UnhealthyThreshold)
	return s, s.Sites > s.PerRound
}

// Warning says in plain words what the cycle does to detection, and how
// to shorten it; it is the detail of validate's diagnostic and the
// agent's log line.
func (s Scale) Warning() string {
	who := "this instance probes"
	if s.Sharded {
		who = "the whole fleet has (in sharded mode each instance probes its share, so divide by the instances: the figures below are for one instance alone)"
	}
	if s.Auto {
		return fmt.Sprintf("%d sites are eligible for probing and %s them with sites_per_round = \"auto\": %d a round at first, then as many as the last rounds' time says fit 3/4 of the round's %s budget (at most twice the last round's sites, never below %d), up to every site; vigil_round_sites_limit shows the size. At %d a round a full cycle takes %d rounds: each site is probed every %s, and an origin that fails is found unhealthy after about %s (%d cycles, unhealthy_threshold); once the rounds cover every site, after %d rounds. The rounds stay small when the sources are slow: if the log says auto sized a round down, give the sources more concurrency, lengthen round_interval or shard.",
			s.Sites, who, s.PerRound, s.Budget, s.PerRound, s.PerRound, s.Rounds, s.Cycle, s.Detection, s.UnhealthyThreshold, s.UnhealthyThreshold)
	}
	return fmt.Sprintf("%d sites are eligible for probing and %s them at most %d a round (sites_per_round), so a full cycle takes %d rounds: each site is probed every %s, and an origin that fails is found unhealthy after about %s (%d cycles, unhealthy_threshold), not %d rounds. To probe every site each round, raise sites_per_round to at least %d, if the sources can vote on that many in a round; or shorten round_interval.",
		s.Sites, who, s.PerRound, s.Rounds, s.Cycle, s.Detection, s.UnhealthyThreshold, s.UnhealthyThreshold, s.Sites)
}

// checkScale warns when the eligible sites exceed sites_per_round (with
// "auto", the size its rounds start at), at that attribute, or at the
// control block when it is not written.
func checkScale(cfg *config.Config, loc *locator) hcl.Diagnostics {
	s, over := ScaleOf(cfg)
	if !over {
		return nil
	}
	at := or(loc.controlAttr("sites_per_round"), loc.controlBlock())
	summary := fmt.Sprintf("More sites than sites_per_round: each site is probed every %s", s.Cycle)
	if s.Auto {
		summary = fmt.Sprintf("More sites than an auto-sized round starts with: each site is probed every %s until the rounds grow", s.Cycle)
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagWarning,
		Summary:  summary,
		Detail:   s.Warning(),
		Subject:  ptr(at),
	}}
}

// controlBlock is the header of the control block, wherever it is
// written; the zero range without one.
func (l *locator) controlBlock() hcl.Range {
	names := make([]string, 0, len(l.files))
	for name := range l.files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b := l.body(name)
		if b == nil {
			continue
		}
		for _, blk := range b.Blocks {
			if blk.Type == "control" {
				return blk.DefRange()
			}
		}
	}
	return hcl.Range{}
}
