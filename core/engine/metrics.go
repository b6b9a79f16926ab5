package engine

import (
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/pluginhost"
	"github.com/vigilcdn/vigil/core/vote"
)

// metrics are the engine's Prometheus series.
type metrics struct {
	votes        *prometheus.CounterVec
	abstentions  *prometheus.CounterVec
	verdicts     *prometheus.CounterVec
	switches     *prometheus.CounterVec
	events       *prometheus.CounterVec
	roundSeconds prometheus.Histogram
	roundsLate   prometheus.Counter
	lateness     prometheus.Histogram
	rounds       prometheus.Counter
	sitesProbed  prometheus.Counter
	roundSize    prometheus.Gauge
	publication  prometheus.Gauge
	storeErrors  prometheus.Counter
	storeHealthy prometheus.Gauge

	// sourceSeconds is each source's time in a round (its Vote calls).
	sourceSeconds *prometheus.HistogramVec

	confirmRounds   prometheus.Counter
	confirmSites    prometheus.Counter
	confirmDeferred prometheus.Counter
	confirmSeconds  prometheus.Histogram
	suspects        *prometheus.CounterVec

	// pluginReasons counts votes by plugin reason; labels bounds its
	// reasons per source (metrics_reason.go).
	pluginReasons *prometheus.CounterVec
	labels        reasonLabels
}

func newMetrics(reg prometheus.Registerer, e *Engine) *metrics {
	m := &metrics{
		votes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_votes_total", Help: "Votes received, by source and outcome (up, down).",
		}, []string{"source", "outcome"}),
		abstentions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_abstentions_total", Help: "Targets a source judged not (an explicit abstention), by source and reason: out_of_time counts targets it had no time for.",
		}, []string{"source", "reason"}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_verdicts_total", Help: "Verdicts, by settling source (\"none\" when no source settled) and verdict.",
		}, []string{"source", "verdict"}),
		switches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_level_switches_total", Help: "Level switches, by reason (failover, failback, manual, config).",
		}, []string{"reason"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_events_total", Help: "Events journaled, by kind.",
		}, []string{"kind"}),
		roundSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vigil_round_duration_seconds", Help: "How long a round took, votes and commit included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		sourceSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vigil_source_duration_seconds", Help: "How long each source of the chain took in a round (or confirmation round) that asked it: which source made a round late.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"source"}),
		roundsLate: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_rounds_late_total", Help: "Rounds that started late because the previous one outlasted round_interval.",
		}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vigil_round_lateness_seconds", Help: "How late a late round started.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_rounds_total", Help: "Rounds run.",
		}),
		sitesProbed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_sites_probed_total", Help: "Sites probed, summed over rounds.",
		}),
		roundSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_round_sites_limit", Help: "The most sites the last round could probe: sites_per_round, or the size sites_per_round = \"auto\" chose for it (never above the eligible sites).",
		}),
		publication: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_publication_version", Help: "The current publication version.",
		}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_store_errors_total", Help: "Failed commits to the state store (the round's changes are retried with the next commit).",
		}),
		storeHealthy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_store_last_commit_successful", Help: "1 when the last commit to the state store succeeded, 0 when it failed (nothing is published until a commit succeeds).",
		}),
		confirmRounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_confirm_rounds_total", Help: "Confirmation rounds run (health_check confirm_interval): rounds of the sites in doubt between the rounds, not counted in vigil_rounds_total.",
		}),
		confirmSites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_confirm_sites_total", Help: "Sites probed by confirmation rounds, summed over them.",
		}),
		confirmDeferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_confirm_deferred_total", Help: "Sites due a confirmation that a confirmation round left out for its budget (control confirm_budget), summed over those rounds.",
		}),
		confirmSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vigil_confirm_round_duration_seconds", Help: "How long a confirmation round took, votes and commit included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		suspects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_confirm_suspects_total", Help: "Passive reports that asked a site's confirmation, by result: accepted, ignored (unknown site, no confirm_interval, paused or not owned), dropped (too many waiting).",
		}, []string{"result"}),
	}
	m.pluginReasons = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_vote_plugin_reasons_total",
		Help: "Votes that carry a plugin reason (such as tlscheck/cert_expiring), by source, outcome (up, down, abstain) and plugin reason; past " + strconv.Itoa(MaxReasonLabels) + " reasons of one source the rest count as reason=\"other\".",
	}, []string{"source", "outcome", "reason"})
	reg.MustRegister(m.confirmRounds, m.confirmSites, m.confirmDeferred, m.confirmSeconds, m.suspects, m.pluginReasons, &pluginMetricsCollector{e: e})
	for _, r := range []string{"accepted", "ignored", "dropped"} {
		m.suspects.WithLabelValues(r)
	}
	reg.MustRegister(m.votes, m.abstentions, m.verdicts, m.switches, m.events, m.storeHealthy,
		m.roundSeconds, m.sourceSeconds, m.roundsLate, m.lateness, m.rounds, m.sitesProbed, m.roundSize, m.publication, m.storeErrors,
		&pluginCollector{e: e}, &probeAgeCollector{e: e})
	// Every series exists from the start, so that increase() sees the
	// first failover too.
	for _, r := range []decide.Reason{decide.ReasonFailover, decide.ReasonFailback, decide.ReasonManual, decide.ReasonConfig} {
		m.switches.WithLabelValues(r.String())
	}
	for _, k := range []decide.EventKind{decide.KindOriginState, decide.KindLevelSwitched, decide.KindFailbackAvailable, decide.KindAllLevelsUnhealthy, decide.KindOriginFlapping, decide.KindPathPartitionSuspected} {
		m.events.WithLabelValues(k.String())
	}
	m.storeHealthy.Set(1)
	return m
}

// initSources makes the per-source series of votes and verdicts exist at
// 0 for every source of the chain, so that rate() and increase() are right
// from the first scrape, before a source's first vote.
func (m *metrics) initSources(names []string) {
	for _, n := range names {
		m.votes.WithLabelValues(n, "up")
		m.votes.WithLabelValues(n, "down")
		m.sourceSeconds.WithLabelValues(n)
	}
	for _, n := range names {
		m.verdicts.WithLabelValues(n, vote.VerdictUp.String())
		m.verdicts.WithLabelValues(n, vote.VerdictDown.String())
	}
	m.verdicts.WithLabelValues("none", vote.VerdictNone.String()) // no source settled
}

var (
	descPluginCalls = prometheus.NewDesc("vigil_plugin_calls_total",
		"Vote calls made to each source's plugin.", []string{"source"}, nil)
	descPluginFailures = prometheus.NewDesc("vigil_plugin_failures_total",
		"Vote calls that produced no votes because of the plugin, by cause (timeout, crash, error, other).", []string{"source", "cause"}, nil)
	descPluginRestarts = prometheus.NewDesc("vigil_plugin_restarts_total",
		"Plugin processes restarted after the first start.", []string{"source"}, nil)
	descPluginDropped = prometheus.NewDesc("vigil_plugin_dropped_votes_total",
		"Votes dropped as garbage (unknown target, bad value or voter, duplicate).", []string{"source"}, nil)
	descPluginDroppedLogLines = prometheus.NewDesc("vigil_plugin_dropped_log_lines_total",
		"Log and output lines of the source's plugin dropped over the host's rate limit.", []string{"source"}, nil)
	descPluginTruncatedDetails = prometheus.NewDesc("vigil_plugin_truncated_details_total",
		"Vote details of the source's plugin cut to the host's maximum length.", []string{"source"}, nil)
)

// pluginCollector reads each current source's counters at scrape time.
type pluginCollector struct{ e *Engine }

func (c *pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPluginCalls
	ch <- descPluginFailures
	ch <- descPluginRestarts
	ch <- descPluginDropped
	ch <- descPluginDroppedLogLines
	ch <- descPluginTruncatedDetails
}

func (c *pluginCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.e.sourceStats() {
		st := s.stats
		ch <- prometheus.MustNewConstMetric(descPluginCalls, prometheus.CounterValue, float64(st.Calls), s.name)
		other := st.Failures - st.Timeouts - st.Crashes - st.PluginErrors
		if st.Failures < st.Timeouts+st.Crashes+st.PluginErrors {
			other = 0
		}
		for cause, v := range map[string]uint64{"timeout": st.Timeouts, "crash": st.Crashes, "error": st.PluginErrors, "other": other} {
			ch <- prometheus.MustNewConstMetric(descPluginFailures, prometheus.CounterValue, float64(v), s.name, cause)
		}
		ch <- prometheus.MustNewConstMetric(descPluginRestarts, prometheus.CounterValue, float64(st.Restarts), s.name)
		ch <- prometheus.MustNewConstMetric(descPluginDropped, prometheus.CounterValue, float64(st.DroppedVotes), s.name)
		ch <- prometheus.MustNewConstMetric(descPluginDroppedLogLines, prometheus.CounterValue, float64(st.DroppedLogLines), s.name)
		ch <- prometheus.MustNewConstMetric(descPluginTruncatedDetails, prometheus.CounterValue, float64(st.TruncatedDetails), s.name)
	}
}

var (
	// ProbeAgeBuckets are the upper bounds, in seconds, of
	// vigil_site_probe_age_seconds: from a fraction of a round to hours,
	// so that a cycle of many rounds (sites above sites_per_round) lands
	// in a bucket of its own.
	ProbeAgeBuckets = []float64{1, 5, 10, 15, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1800, 3600, 7200}

	descProbeAge = prometheus.NewDesc("vigil_site_probe_age_seconds",
		"Time since each site's last probe, over the sites this instance may probe (health check enabled, two enabled origins, owned in sharded mode), taken at scrape time; sites never probed since the state began are left out.", nil, nil)
	descProbeAgeMax = prometheus.NewDesc("vigil_site_probe_age_max_seconds",
		"The largest time since a site's last probe, over the sites of vigil_site_probe_age_seconds (0 when there are none).", nil, nil)
)

// probeAgeCollector makes, at scrape time, one histogram of how long ago
// each probed site was last probed, and its maximum: two series whatever
// the fleet, where a gauge per site would be 100,000. A standby (not
// active) writes neither: its views age while another instance probes.
type probeAgeCollector struct{ e *Engine }

// ProbeAgeCollector is the collector of vigil_site_probe_age_seconds and
// vigil_site_probe_age_max_seconds alone (the engine's registry has it
// already): for a benchmark of its cost.
func ProbeAgeCollector(e *Engine) prometheus.Collector { return &probeAgeCollector{e: e} }

func (c *probeAgeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descProbeAge
	ch <- descProbeAgeMax
}

func (c *probeAgeCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.e.active() {
		return
	}
	v := c.e.Views()
	if v == nil {
		return
	}
	counts, n, sum, most := v.probeAges(c.e.opts.Now().UnixNano(), c.e.opts.Owns)
	cum := make(map[float64]uint64, len(ProbeAgeBuckets))
	var acc uint64
	for i, b := range ProbeAgeBuckets {
		acc += counts[i]
		cum[b] = acc
	}
	ch <- prometheus.MustNewConstHistogram(descProbeAge, n, sum, cum)
	ch <- prometheus.MustNewConstMetric(descProbeAgeMax, prometheus.GaugeValue, most)
}

// Schedule is readmodel.Scheduler: sites_per_round, round_interval and
// the sharded share's filter, for the summary's cycle.
func (v *Views) Schedule() (perRound int, interval time.Duration, owns func(string) bool) {
	perRound = v.fleet.SitesPerRound
	if v.auto && v.roundSize > 0 {
		perRound = v.roundSize // the size of the last round
	}
	return perRound, v.fleet.RoundInterval(), v.fleet.Owns
}

// ScheduleAuto is readmodel.AutoScheduler: whether sites_per_round is
// "auto", and the size of the last round (0 before the first).
func (v *Views) ScheduleAuto() (auto bool, lastSize int) { return v.auto, v.roundSize }

// probeAges walks the sites the scheduler may probe (and owns, when owns
// is set) and returns their probe ages at now (Unix nanoseconds) in
// ProbeAgeBuckets (counts[i]: ages in (bound i-1, bound i]; above the
// last bound, in none), their number, sum and maximum, in seconds.
func (v *Views) probeAges(now int64, owns func(string) bool) (counts []uint64, n uint64, sum, most float64) {
	counts = make([]uint64, len(ProbeAgeBuckets))
	for i, snap := range v.sites {
		spec := v.fleet.Sites[i].Spec
		if !spec.HealthCheck {
			continue
		}
		enabled := 0
		for _, o := range snap.origins {
			if o.state != decide.Disabled {
				enabled++
			}
		}
		if enabled < 2 || (owns != nil && !owns(spec.Name)) {
			continue
		}
		at := snap.probedAt
		if last := v.last[i]; last.rec != nil {
			at = last.rec.at
		}
		if at == 0 {
			continue // never probed
		}
		age := max(0, float64(now-at)/1e9)
		n++
		sum += age
		most = max(most, age)
		if k, _ := slices.BinarySearch(ProbeAgeBuckets, age); k < len(counts) {
			counts[k]++
		}
	}
	return counts, n, sum, most
}

type namedStats struct {
	name  string
	stats pluginhost.Stats
}
