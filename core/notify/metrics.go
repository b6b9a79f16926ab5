package notify

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the dispatcher's Prometheus collectors.
type metrics struct {
	deliveries *prometheus.CounterVec
	retries    *prometheus.CounterVec
	lost       *prometheus.CounterVec
	storeErrs  *prometheus.CounterVec
	lag        *lagCollector
}

func newMetrics(d *Dispatcher) *metrics {
	return &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_notify_deliveries_total",
			Help: "Notices handled by notifier and outcome: delivered (2xx, or written to the log) or rejected (a permanent failure, not retried).",
		}, []string{"notifier", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_notify_retries_total",
			Help: "Webhook delivery attempts that failed and were retried, by notifier.",
		}, []string{"notifier"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_notify_lost_events_total",
			Help: "Journal events a notifier never handled because it fell behind the bounded event journal.",
		}, []string{"notifier"}),
		storeErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_notify_store_errors_total",
			Help: "Failed reads of the event journal or writes of a delivery cursor, by notifier.",
		}, []string{"notifier"}),
		lag: &lagCollector{d: d, desc: prometheus.NewDesc(
			"vigil_notify_lag_events",
			"Journal events not yet handled by a notifier (the newest event seen minus its cursor).",
			[]string{"notifier"}, nil)},
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.deliveries, m.retries, m.lost, m.storeErrs, m.lag}
}

// forget drops the series of a notifier that is gone.
func (m *metrics) forget(name string) {
	m.deliveries.DeletePartialMatch(prometheus.Labels{"notifier": name})
	m.retries.DeleteLabelValues(name)
	m.lost.DeleteLabelValues(name)
	m.storeErrs.DeleteLabelValues(name)
}

// lagCollector computes each running notifier's lag when scraped, so a
// notifier stuck retrying still shows a growing lag.
type lagCollector struct {
	d    *Dispatcher
	desc *prometheus.Desc
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	head := c.d.head.Load()
	for _, w := range c.d.current() {
		if w.alerts != nil {
			continue // states, not a place in the journal
		}
		cur := w.cursor.Load()
		lag := uint64(0)
		if head > cur {
			lag = head - cur
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(lag), w.name)
	}
}
