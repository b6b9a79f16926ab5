package engine

import (
	"bufio"
	"io"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/pluginhost"
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
	publication  prometheus.Gauge
	storeErrors  prometheus.Counter
	storeHealthy prometheus.Gauge
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
		storeHealthy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_store_last_commit_successful", Help: "1 when the last commit to the state store succeeded, 0 when it failed (nothing is published until a commit succeeds).",
		}),
	}
	reg.MustRegister(m.votes, m.abstentions, m.verdicts, m.switches, m.events, m.storeHealthy,
		m.roundSeconds, m.roundsLate, m.lateness, m.rounds, m.sitesProbed, m.publication, m.storeErrors,
		&pluginCollector{e: e})
	// Every series exists from the start, so that increase() sees the
	// first failover too.
	for _, r := range []decide.Reason{decide.ReasonFailover, decide.ReasonFailback, decide.ReasonManual, decide.ReasonConfig} {
		m.switches.WithLabelValues(r.String())
	}
	for _, k := range []decide.EventKind{decide.KindOriginState, decide.KindLevelSwitched, decide.KindFailbackAvailable, decide.KindAllLevelsUnhealthy} {
		m.events.WithLabelValues(k.String())
	}
	m.storeHealthy.Set(1)
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

// WriteMetrics writes the per-site series in the Prometheus text format
// (version 0.0.4): vigil_site_level and vigil_origin_state. They are
// written straight from the views, site by site, so that neither the
// engine nor a scrape holds a fleet-sized set of metric objects.
func (v *Views) WriteMetrics(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString("# HELP vigil_site_level The current origin level of each site.\n# TYPE vigil_site_level gauge\n")
	for i := range v.sites {
		bw.WriteString(`vigil_site_level{site="`)
		writeLabel(bw, v.Name(i))
		bw.WriteString(`"} `)
		bw.WriteString(strconv.Itoa(v.sites[i].level))
		bw.WriteByte('\n')
	}
	bw.WriteString("# HELP vigil_origin_state 1 for an origin's current state (unknown, healthy, unhealthy, disabled), 0 for the others.\n# TYPE vigil_origin_state gauge\n")
	for i := range v.sites {
		spec := v.fleet.Sites[i].Spec
		for oi, o := range v.sites[i].origins {
			for h := decide.Unknown; h <= decide.Disabled; h++ {
				bw.WriteString(`vigil_origin_state{origin="`)
				writeLabel(bw, spec.Origins[oi].Name)
				bw.WriteString(`",site="`)
				writeLabel(bw, v.Name(i))
				bw.WriteString(`",state="`)
				bw.WriteString(h.String())
				if h == o.state {
					bw.WriteString("\"} 1\n")
				} else {
					bw.WriteString("\"} 0\n")
				}
			}
		}
	}
	return bw.Flush()
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func writeLabel(w *bufio.Writer, s string) {
	if strings.ContainsAny(s, "\\\"\n") {
		labelEscaper.WriteString(w, s)
		return
	}
	w.WriteString(s)
}
