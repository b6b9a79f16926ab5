package preflight

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
)

// checkProbeFit warns, once per source, of the probe timeout the engine
// shortens without a word: a site that sets no health_check { timeout }
// probes with the shorter of the default and what fits the source's
// deadline (config.HealthCheck.ProbeTimeout, which the engine calls for
// every target). A timeout that is set and does not fit is already an
// error of the loader, and a chain whose deadlines exceed round_interval a
// warning of it; the engine clips nothing else (a round that runs long
// starts the next one late).
func checkProbeFit(cfg *config.Config, loc *locator) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, src := range cfg.Sources {
		var names []string
		count := 0
		var want, got time.Duration
		for _, s := range cfg.Sites {
			hc := s.HealthCheck
			if !hc.Enabled || hc.TimeoutSet || !slices.Contains(s.Sources, src.Name) {
				continue
			}
			if p := hc.ProbeTimeout(src.Timeout); p < hc.Timeout {
				count++
				if len(names) < 3 {
					names = append(names, fmt.Sprintf("%q", s.Name))
				}
				want, got = hc.Timeout, p
			}
		}
		if count == 0 {
			continue
		}
		list := strings.Join(names, ", ")
		if count > len(names) {
			list += fmt.Sprintf(" and %d more", count-len(names))
		}
		how, at := "its timeout", src.TimeoutRange
		if !src.TimeoutSet {
			how = fmt.Sprintf("its share of round_interval %s", cfg.Control.RoundInterval)
			at = or(loc.controlAttr("round_interval"), src.DeclRange)
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Probe timeout shortened to fit the source's deadline",
			Detail: fmt.Sprintf("Source %q has %s a round (%s), so the %d site(s) that it probes without health_check { timeout } (%s) probe with %s, not the default %s: the engine shortens a timeout that is not set to what fits the source's deadline, and says nothing when it does. To probe for %s, give source %q a deadline of at least %s (its timeout, or a longer round_interval); or set health_check { timeout } to %s or less on those sites to make it explicit.",
				src.Name, src.Timeout, how, count, list, got, want, want, src.Name, deadlineFor(want), got),
			Subject: at.Ptr(),
		})
	}
	return diags
}

// deadlineFor is the shortest source deadline, to the millisecond, whose
// probes may last probe (config.MaxProbeTimeout grows with the deadline).
func deadlineFor(probe time.Duration) time.Duration {
	// The least n milliseconds that fit: fits(lo) is false, fits(hi) true.
	lo, hi := int64(0), (2*probe + 10*time.Second).Milliseconds()
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if config.MaxProbeTimeout(time.Duration(mid)*time.Millisecond) >= probe {
			hi = mid
		} else {
			lo = mid
		}
	}
	return time.Duration(hi) * time.Millisecond
}
