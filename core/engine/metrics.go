package engine

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/pluginhost"
)

// metrics are the engine's Prometheus series.
type metrics struct {
	votes        *prometheus.CounterVec
	verdicts     *prometheus.CounterVec
	originState  *prometheus.GaugeVec
	siteLevel    *prometheus.GaugeVec
	switches     *prometheus.CounterVec
	events       *prometheus.CounterVec
	roundSeconds prometheus.Histogram
	roundsLate   prometheus.Counter
	lateness     prometheus.Histogram
	rounds       prometheus.Counter
	sitesProbed  prometheus.Counter
	publication  prometheus.Gauge
	storeErrors  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, e *Engine) *metrics {
	m := &metrics{
		votes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_votes_total", Help: "Votes received, by source and outcome (up, down).",
		}, []string{"source", "outcome"}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_verdicts_total", Help: "Verdicts, by settling source (\"none\" when no source settled) and verdict.",
		}, []string{"source", "verdict"}),
		originState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vigil_origin_state", Help: "1 for an origin's current state (unknown, healthy, unhealthy, disabled), 0 for the others.",
		}, []string{"site", "origin", "state"}),
		siteLevel: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vigil_site_level", Help: "The current origin level of each site.",
		}, []string{"site"}),
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
		publication: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_publication_version", Help: "The current publication version.",
		}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_store_errors_total", Help: "Failed commits to the state store (the round's changes are retried with the next commit).",
		}),
	}
	reg.MustRegister(m.votes, m.verdicts, m.originState, m.siteLevel, m.switches, m.events,
		m.roundSeconds, m.roundsLate, m.lateness, m.rounds, m.sitesProbed, m.publication, m.storeErrors,
		&pluginCollector{e: e})
	return m
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
)

// pluginCollector reads each current source's counters at scrape time.
type pluginCollector struct{ e *Engine }

func (c *pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPluginCalls
	ch <- descPluginFailures
	ch <- descPluginRestarts
	ch <- descPluginDropped
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
	}
}

type namedStats struct {
	name  string
	stats pluginhost.Stats
}
