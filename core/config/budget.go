package config

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// A round's time is budgeted down the chain, so that the sum of the
// sources' deadlines fits in round_interval and every probe fits in its
// source's deadline.
//
//   - ChainBudget(round_interval) is what the chain's sources may use; the
//     rest is the engine's (applying and committing the round).
//   - A source without `timeout` gets an equal share of what the sources
//     with one leave of the budget, and at least half of an equal share of
//     the whole budget.
//   - A site without health_check { timeout } probes with the shorter of
//     5s and MaxProbeTimeout(the source's deadline); a timeout that is set
//     must fit MaxProbeTimeout of every source of the site, or its origins
//     could never get a verdict from that source.
//
// So a configuration that sets no timeout always fits, whatever the number
// of sources.

// ChainBudget is the part of round_interval the chain's sources may use.
func ChainBudget(roundInterval time.Duration) time.Duration {
	return roundInterval - min(roundInterval/10, 2*time.Second)
}

// MaxProbeTimeout is the longest probe timeout that fits a source's
// deadline: the rest is the time to spread the round's probes and to send
// the votes back (through a node gateway and its nodes too).
func MaxProbeTimeout(deadline time.Duration) time.Duration {
	return deadline - min(deadline/5, 1500*time.Millisecond)
}

// budget gives every source without a timeout its share of the round, and
// warns when the deadlines add up to more than round_interval.
func (l *loader) budget() {
	interval := l.cfg.Control.RoundInterval
	budget := ChainBudget(interval)
	var set time.Duration
	unset := 0
	for _, s := range l.cfg.Sources {
		if s.TimeoutSet {
			set += s.Timeout
		} else {
			unset++
		}
	}
	if unset > 0 {
		share := (budget - set) / time.Duration(unset)
		if floor := budget / time.Duration(2*len(l.cfg.Sources)); share < floor {
			share = floor // the sources with a timeout took (almost) all of it
		}
		share = share.Truncate(time.Millisecond)
		for _, s := range l.cfg.Sources {
			if !s.TimeoutSet {
				s.Timeout = share
			}
		}
	}
	var total time.Duration
	var parts []string
	var first *Source
	for _, s := range l.cfg.Sources {
		total += s.Timeout
		how := "set"
		if !s.TimeoutSet {
			how = "its share"
		} else if first == nil {
			first = s
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", s.Name, s.Timeout, how))
	}
	if first != nil && total > interval {
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Source deadlines exceed round_interval",
			Detail: fmt.Sprintf("The chain's deadlines add up to %s (%s), more than round_interval %s: a round whose sources all use their deadline runs late, and the next one starts late. Lower the timeouts, leave them out (each source then gets its share of %s), or raise round_interval.",
				total, strings.Join(parts, ", "), interval, budget),
			Subject: first.TimeoutRange.Ptr(),
		})
	}
}

// probeFits reports a site timeout that does not fit the deadline of a
// source of the site.
func (l *loader) probeFits(s *Site) {
	hc := s.HealthCheck
	if !hc.Enabled || !hc.TimeoutSet {
		return
	}
	for _, name := range s.Sources {
		src := l.cfg.Source(name)
		if src == nil {
			continue
		}
		if fit := MaxProbeTimeout(src.Timeout); hc.Timeout > fit {
			how := "its share of round_interval"
			if src.TimeoutSet {
				how = "its timeout"
			}
			l.errorCapped("probe-fit", hc.TimeoutRange, "Probe timeout does not fit the source's deadline",
				fmt.Sprintf("Site %q probes with timeout = %s, but source %q has %s a round (%s): a probe must end by %s, which leaves time to spread the round's probes and send the votes back, or this site's origins never get a verdict from it. Lower timeout to %s or less, or give source %q a longer timeout (or raise round_interval).",
					s.Name, hc.Timeout, name, src.Timeout, how, fit, fit.Truncate(time.Millisecond), name))
			return
		}
	}
}

// cappedLimit is how many diagnostics of one kind are reported one by
// one; the rest are counted in one last diagnostic, so that a rule broken
// by a whole fleet does not bury the others.
const cappedLimit = 10

type cappedDiags struct {
	n     int
	sev   hcl.DiagnosticSeverity
	summ  string
	first hcl.Range
}

func (l *loader) errorCapped(kind string, at hcl.Range, summary, detail string) {
	l.capDiag(kind, hcl.DiagError, at, summary, detail)
}

func (l *loader) warnCapped(kind string, at hcl.Range, summary, detail string) {
	l.capDiag(kind, hcl.DiagWarning, at, summary, detail)
}

func (l *loader) capDiag(kind string, sev hcl.DiagnosticSeverity, at hcl.Range, summary, detail string) {
	if l.capped == nil {
		l.capped = map[string]*cappedDiags{}
	}
	c := l.capped[kind]
	if c == nil {
		c = &cappedDiags{sev: sev, summ: summary, first: at}
		l.capped[kind] = c
	}
	c.n++
	if c.n <= cappedLimit {
		l.diags = append(l.diags, &hcl.Diagnostic{Severity: sev, Summary: summary, Detail: detail, Subject: at.Ptr()})
	}
}

// flushCapped adds the count of what capDiag left out.
func (l *loader) flushCapped() {
	kinds := make([]string, 0, len(l.capped))
	for k := range l.capped {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		if c := l.capped[k]; c.n > cappedLimit {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: c.sev,
				Summary:  c.summ,
				Detail:   fmt.Sprintf("%d more places have the same problem; the first %d are reported above.", c.n-cappedLimit, cappedLimit),
				Subject:  c.first.Ptr(),
			})
		}
	}
}
