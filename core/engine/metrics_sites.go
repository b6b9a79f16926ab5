package engine

import (
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/sdk"
)

// The per-site families of /metrics, made at scrape time from one Views
// snapshot: nothing fleet-sized is held between scrapes. SiteGatherer
// (metrics_gather.go) builds them for the API; SiteCollector makes the
// same series as const metrics for a registry, the reference the
// gatherer's page is checked against.

// Groups of series a scrape may ask for by name (collect[]=GROUP, as
// node_exporter's collect[] names its collectors).
const (
	// MetricsGroupAgent is every series of the agent's own registry
	// (rounds, plugins, store, cluster, Go and the process).
	MetricsGroupAgent = "agent"
	// MetricsGroupSite is the one-per-site series: vigil_site_level,
	// vigil_site_level_weight and the thresholds.
	MetricsGroupSite = "site"
	// MetricsGroupOrigin is the per-origin series: vigil_origin_state and
	// the consecutive counters.
	MetricsGroupOrigin = "origin"
	// MetricsGroupProbe is the per-vote series of the last round
	// (vigil_probe_*) and vigil_origin_info, for fleets of at most
	// probe_series_sites sites.
	MetricsGroupProbe = "probe"
)

// MetricsGroups are the group names, in the order docs/metrics.md lists
// them.
var MetricsGroups = []string{MetricsGroupAgent, MetricsGroupSite, MetricsGroupOrigin, MetricsGroupProbe}

// SiteMetrics chooses which per-site series a scrape gets.
type SiteMetrics struct {
	// Prefix keeps only the sites whose names start with it ("" for all).
	Prefix string
	// Sites, Origins and Probes turn on the groups MetricsGroupSite,
	// MetricsGroupOrigin and MetricsGroupProbe.
	Sites, Origins, Probes bool
}

// AllSiteMetrics is every per-site series of every site.
var AllSiteMetrics = SiteMetrics{Sites: true, Origins: true, Probes: true}

// The per-site families: SiteGatherer builds them, SiteCollector makes
// them as const metrics. Label names are in order.
var (
	famSiteLevel = &siteFamily{"vigil_site_level",
		"The current origin level of each site.", []string{"site"}}
	famSiteLevelWeight = &siteFamily{"vigil_site_level_weight",
		"The per cent of new requests each level of a site with a failback ramp gets.", []string{"level", "site"}}
	famSiteUnhealthyThreshold = &siteFamily{"vigil_site_unhealthy_threshold",
		"Failed rounds in a row that make an origin of the site unhealthy.", []string{"site"}}
	famSiteHealthyThreshold = &siteFamily{"vigil_site_healthy_threshold",
		"Good rounds in a row that make an origin of the site healthy again.", []string{"site"}}
	famOriginState = &siteFamily{"vigil_origin_state",
		"1 for an origin's current state (unknown, healthy, unhealthy, disabled), 0 for the others.", []string{"origin", "site", "state"}}
	famOriginFailures = &siteFamily{"vigil_origin_consecutive_failures",
		"Down verdicts in a row of each origin: at vigil_site_unhealthy_threshold a healthy origin turns unhealthy.", []string{"origin", "site"}}
	famOriginSuccesses = &siteFamily{"vigil_origin_consecutive_successes",
		"Up verdicts in a row of each origin: at vigil_site_healthy_threshold an unhealthy origin turns healthy.", []string{"origin", "site"}}
	famOriginInfo = &siteFamily{"vigil_origin_info",
		"1 for each origin, with its level and address: join the vigil_probe_* series on site and origin to see where they went.", []string{"address", "level", "origin", "site"}}
	famProbeSuccess = &siteFamily{"vigil_probe_success",
		"1 when the voter found the origin up in the site's last round, 0 when down (no series for an abstention).", []string{"origin", "site", "source", "voter"}}
	famProbeDuration = &siteFamily{"vigil_probe_duration_seconds",
		"How long the voter's check of the origin took in the site's last round (0 when not measured).", []string{"origin", "site", "source", "voter"}}
	famProbeReason = &siteFamily{"vigil_probe_reason",
		"The reason of the voter's last vote on the origin (ok, connect_failed, timeout, bad_status, ...), as a label of a series valued 1.", []string{"origin", "reason", "site", "source", "voter"}}
	famProbeHTTPStatus = &siteFamily{"vigil_probe_http_status_code",
		"The HTTP status of the voter's last check of the origin (0 when no response arrived); only for sources that send it, as blackbox_exporter's probe_http_status_code.", []string{"origin", "site", "source", "voter"}}
	famProbeHTTPPhase = &siteFamily{"vigil_probe_http_duration_seconds",
		"The time of each phase of the voter's last HTTP check of the origin, summed over redirects, as blackbox_exporter's probe_http_duration_seconds.", []string{"origin", "phase", "site", "source", "voter"}}
	famProbeCertExpiry = &siteFamily{"vigil_probe_ssl_earliest_cert_expiry",
		"When the certificate the origin presented to the voter's last check expires, in Unix seconds (no series for plain HTTP), as blackbox_exporter's probe_ssl_earliest_cert_expiry.", []string{"origin", "site", "source", "voter"}}
)

// The families' descriptions, for SiteCollector.
var (
	descSiteLevel              = famSiteLevel.desc()
	descSiteLevelWeight        = famSiteLevelWeight.desc()
	descSiteUnhealthyThreshold = famSiteUnhealthyThreshold.desc()
	descSiteHealthyThreshold   = famSiteHealthyThreshold.desc()
	descOriginState            = famOriginState.desc()
	descOriginFailures         = famOriginFailures.desc()
	descOriginSuccesses        = famOriginSuccesses.desc()
	descOriginInfo             = famOriginInfo.desc()
	descProbeSuccess           = famProbeSuccess.desc()
	descProbeDuration          = famProbeDuration.desc()
	descProbeReason            = famProbeReason.desc()
	descProbeHTTPStatus        = famProbeHTTPStatus.desc()
	descProbeHTTPPhase         = famProbeHTTPPhase.desc()
	descProbeCertExpiry        = famProbeCertExpiry.desc()
)

// HTTPPhases are the values of the label phase of
// vigil_probe_http_duration_seconds, blackbox_exporter's.
var HTTPPhases = []string{"resolve", "connect", "tls", "processing", "transfer"}

// siteCollector makes the per-site families of one Views snapshot.
type siteCollector struct {
	v   *Views
	sel SiteMetrics
}

// SiteCollector is a collector of v's per-site series chosen by sel, for a
// registry made for one scrape. A registry gathers from it the same page
// SiteGatherer builds, at several times the cost (a const metric, a check,
// a hash and a sort for each series): the API serves SiteGatherer's, and
// tests and benchmarks compare the two.
func (v *Views) SiteCollector(sel SiteMetrics) prometheus.Collector {
	return &siteCollector{v: v, sel: sel}
}

func (c *siteCollector) Describe(ch chan<- *prometheus.Desc) {
	if c.sel.Sites {
		ch <- descSiteLevel
		ch <- descSiteLevelWeight
		ch <- descSiteUnhealthyThreshold
		ch <- descSiteHealthyThreshold
	}
	if c.sel.Origins {
		ch <- descOriginState
		ch <- descOriginFailures
		ch <- descOriginSuccesses
	}
	if c.sel.Probes {
		ch <- descOriginInfo
		ch <- descProbeSuccess
		ch <- descProbeDuration
		ch <- descProbeReason
		ch <- descProbeHTTPStatus
		ch <- descProbeHTTPPhase
		ch <- descProbeCertExpiry
	}
}

// span is the sites whose names start with the prefix: sites are in name
// order, so they are one run.
func (v *Views) span(prefix string) (from, to int) {
	if prefix == "" {
		return 0, len(v.sites)
	}
	from = sort.Search(len(v.sites), func(i int) bool { return v.Name(i) >= prefix })
	to = from
	for to < len(v.sites) && strings.HasPrefix(v.Name(to), prefix) {
		to++
	}
	return from, to
}

func (c *siteCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.v
	from, to := v.span(c.sel.Prefix)
	gauge := func(d *prometheus.Desc, value float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, value, labels...)
	}
	states := [...]string{decide.Unknown.String(), decide.Healthy.String(), decide.Unhealthy.String(), decide.Disabled.String()}
	for i := from; i < to; i++ {
		name := v.Name(i)
		spec := v.fleet.Sites[i].Spec
		snap := v.sites[i]
		if c.sel.Sites {
			gauge(descSiteLevel, float64(snap.level), name)
			gauge(descSiteUnhealthyThreshold, float64(spec.UnhealthyThreshold), name)
			gauge(descSiteHealthyThreshold, float64(spec.HealthyThreshold), name)
			if spec.AntiFlap != nil && spec.AntiFlap.Ramp != nil {
				for _, l := range spec.Levels {
					gauge(descSiteLevelWeight, float64(levelWeight(snap, l)), strconv.Itoa(l), name)
				}
			}
		}
		if c.sel.Origins {
			for oi, o := range snap.origins {
				origin := spec.Origins[oi].Name
				for h := decide.Unknown; h <= decide.Disabled; h++ {
					val := 0.0
					if h == o.state {
						val = 1
					}
					gauge(descOriginState, val, origin, name, states[h-decide.Unknown])
				}
				gauge(descOriginFailures, float64(o.failures), origin, name)
				gauge(descOriginSuccesses, float64(o.successes), origin, name)
			}
		}
	}
	if c.sel.Probes && len(v.sites) <= v.probeSeries {
		c.collectProbes(ch, from, to)
	}
}

// levelWeight is the per cent of new requests level l of a site with a
// ramp configured gets: 100 for the current level and 0 for the others,
// but during a ramp the recovering level's weight and the rest for the
// level left.
func levelWeight(snap *siteSnap, l int) int {
	switch {
	case snap.ramp != nil && l == snap.level:
		return snap.ramp.weight
	case snap.ramp != nil && l == snap.ramp.from:
		return 100 - snap.ramp.weight
	case l == snap.level:
		return 100
	}
	return 0
}

// collectProbes makes the last round's votes of each origin into
// blackbox_exporter-style series (success, duration, reason; an
// abstention has no success; and, for votes that carry an HTTP check's
// fields, its status, phase times and certificate expiry) and each
// origin's info.
func (c *siteCollector) collectProbes(ch chan<- prometheus.Metric, from, to int) {
	v := c.v
	chain := v.fleet.Chain
	gauge := func(d *prometheus.Desc, value float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, value, labels...)
	}
	for i := from; i < to; i++ {
		name := v.Name(i)
		spec := v.fleet.Sites[i].Spec
		cfg := v.fleet.Sites[i].Config
		for oi := range spec.Origins {
			o := &spec.Origins[oi]
			gauge(descOriginInfo, 1, originAddress(cfg, oi, o.Name), strconv.Itoa(o.Level), o.Name, name)
		}
		last := v.last[i]
		if last.rec == nil {
			continue
		}
		rs := &last.rec.sites[last.site]
		for oi := range spec.Origins {
			origin := spec.Origins[oi].Name
			t := &last.rec.targets[rs.firstTarget+uint32(oi)]
			for k := t.votesFrom; k < t.votesTo; k++ {
				r := &last.rec.votes[k]
				if int(r.source) >= len(chain) {
					continue
				}
				src := chain[r.source].Name
				switch sdk.Value(r.value) {
				case sdk.Up:
					gauge(descProbeSuccess, 1, origin, name, src, r.voter)
				case sdk.Down:
					gauge(descProbeSuccess, 0, origin, name, src, r.voter)
				}
				gauge(descProbeDuration, float64(r.latency)/1e6, origin, name, src, r.voter)
				gauge(descProbeReason, 1, origin, sdk.Reason(r.reason).String(), name, src, r.voter)
				if h := r.http; h != nil {
					gauge(descProbeHTTPStatus, float64(h.StatusCode), origin, name, src, r.voter)
					for k, d := range [...]time.Duration{h.Resolve, h.Connect, h.TLS, h.Processing, h.Transfer} {
						gauge(descProbeHTTPPhase, d.Seconds(), origin, HTTPPhases[k], name, src, r.voter)
					}
					if !h.CertNotAfter.IsZero() {
						gauge(descProbeCertExpiry, float64(h.CertNotAfter.Unix()), origin, name, src, r.voter)
					}
				}
			}
		}
	}
}

// originAddress is the configured address of origin oi of a site (named
// name), or "" when the configuration is not at hand.
func originAddress(cfg *config.Site, oi int, name string) string {
	if cfg == nil {
		return ""
	}
	if oi < len(cfg.Origins) && cfg.Origins[oi].Name == name {
		return cfg.Origins[oi].Address
	}
	for _, o := range cfg.Origins {
		if o.Name == name {
			return o.Address
		}
	}
	return ""
}

// WriteMetrics writes every per-site series of v in the Prometheus text
// format (version 0.0.4), from SiteGatherer: what /metrics serves after
// the agent's registry, for tests and tools that want the per-site page
// alone.
func (v *Views) WriteMetrics(w io.Writer) error {
	mfs, err := v.SiteGatherer(AllSiteMetrics).Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}
