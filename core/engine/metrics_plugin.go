package engine

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/sdk"
)

// PluginMetricPrefix is put before the name of each series a plugin
// reports (sdk.Metric): "dnspup_quota_requests_total" is exported as
// vigil_plugin_dnspup_quota_requests_total.
const PluginMetricPrefix = "vigil_plugin_"

// metricsSource is a source whose plugin reports metrics of its own
// (pluginhost.Source).
type metricsSource interface {
	Name() string
	Metrics() []sdk.Metric
}

// pluginMetricsCollector exports, at scrape time, the series the plugins
// reported with their latest answers, each with a label source. It is an
// unchecked collector: the names are the plugins'. One name is one family:
// its first series (in chain order) sets its kind, help and label names,
// and a series of another source that disagrees is left out, so that the
// page stays valid whatever the plugins send.
type pluginMetricsCollector struct{ e *Engine }

func (c *pluginMetricsCollector) Describe(chan<- *prometheus.Desc) {}

func (c *pluginMetricsCollector) Collect(ch chan<- prometheus.Metric) {
	c.e.statsMu.Lock()
	sources := c.e.liveSources
	c.e.statsMu.Unlock()
	type family struct {
		desc   *prometheus.Desc
		kind   sdk.MetricKind
		labels []string // the series' own label names, sorted
	}
	families := map[string]*family{}
	for _, src := range sources {
		ms, ok := src.(metricsSource)
		if !ok {
			continue
		}
		name := ms.Name()
		for _, m := range ms.Metrics() {
			labels := make([]string, 0, len(m.Labels))
			for k := range m.Labels {
				labels = append(labels, k)
			}
			slices.Sort(labels)
			f := families[m.Name]
			if f == nil {
				help := m.Help
				if help == "" {
					help = "A series of the plugin's own (sdk.Metric)."
				}
				f = &family{desc: prometheus.NewDesc(PluginMetricPrefix+m.Name, help, append([]string{"source"}, labels...), nil), kind: m.Kind, labels: labels}
				families[m.Name] = f
			} else if f.kind != m.Kind || !slices.Equal(f.labels, labels) {
				continue
			}
			values := make([]string, 0, 1+len(labels))
			values = append(values, name)
			for _, k := range labels {
				values = append(values, m.Labels[k])
			}
			vt := prometheus.GaugeValue
			if m.Kind == sdk.MetricCounter {
				vt = prometheus.CounterValue
			}
			if pm, err := prometheus.NewConstMetric(f.desc, vt, m.Value, values...); err == nil {
				ch <- pm
			}
		}
	}
}
