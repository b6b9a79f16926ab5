package preflight

import (
	"fmt"
	"slices"

	"github.com/vigilcdn/vigil/core/config"
)

// directPlugin is the plugin of the direct probe, the source that opens
// one connection per probe in flight.
const directPlugin = "vigil-source-direct"

// DirectMaxConcurrency and DirectFDReserve mirror the direct plugin's
// DefaultMaxConcurrency and fdReserve (plugins/direct, which core does
// not import): without a concurrency attribute it keeps as many probes in
// flight as a round has targets, up to DirectMaxConcurrency and to the
// open-file limit less DirectFDReserve.
const (
	DirectMaxConcurrency = 4096
	DirectFDReserve      = 64
)

// FileLimit compares the probes a round of the direct source wants in
// flight with what the open-file limit lets it have.
type FileLimit struct {
	// Limit is the soft open-file limit (RLIMIT_NOFILE) the plugins
	// inherit.
	Limit int
	// Usable is Limit less DirectFDReserve: the most probes in flight.
	Usable int
	// Need is the targets of a full round (sites_per_round of the
	// eligible sites, their enabled origins), up to DirectMaxConcurrency.
	Need int
	// Sources are the direct sources concerned.
	Sources []string
}

// FileLimitOf returns the comparison for cfg under the open-file limit
// limit (OpenFileLimit, or a value a test injects), and whether the limit
// caps the probes in flight below what a round needs. No direct source,
// or a limit of 0 (unknown), is never capped.
func FileLimitOf(cfg *config.Config, limit int) (FileLimit, bool) {
	fl := FileLimit{Limit: limit, Usable: max(0, limit-DirectFDReserve)}
	for _, s := range cfg.Sources {
		if s.Plugin == directPlugin {
			fl.Sources = append(fl.Sources, s.Name)
		}
	}
	scale, _ := ScaleOf(cfg)
	targets := 0
	for _, site := range cfg.Sites {
		if site.HealthCheck == nil || !site.HealthCheck.Enabled || len(fl.Sources) == 0 {
			continue
		}
		if len(site.Sources) > 0 && !slices.ContainsFunc(fl.Sources, func(n string) bool { return slices.Contains(site.Sources, n) }) {
			continue
		}
		n := 0
		for _, o := range site.Origins {
			if o.Enabled {
				n++
			}
		}
		if n >= 2 {
			targets += n
		}
	}
	if scale.Sites > scale.PerRound && scale.PerRound > 0 && !scale.Auto {
		// A round probes sites_per_round of them: their share of targets
		// (an auto-sized round may grow to every site: all of them).
		targets = (targets*scale.PerRound + scale.Sites - 1) / scale.Sites
	}
	fl.Need = min(targets, DirectMaxConcurrency)
	return fl, limit > 0 && len(fl.Sources) > 0 && fl.Usable < fl.Need
}

// Warning says what the limit does and how to raise it.
func (fl FileLimit) Warning() string {
	return fmt.Sprintf("the open-file limit is %d, so the direct source(s) %q keep at most %d probes in flight (%d descriptors are kept for the plugin itself), while a round has %d targets to probe: the rest wait, and under an outage whose origins black-hole connections the probes run out of time (out_of_time abstentions) and failover is late. Raise the limit to at least %d: LimitNOFILE= in the systemd unit (the packaged units set 65536), or ulimit -n before starting vigil.",
		fl.Limit, fl.Sources, fl.Usable, DirectFDReserve, fl.Need, fl.Need+DirectFDReserve)
}
