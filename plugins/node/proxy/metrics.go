package proxy

import (
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests     *prometheus.CounterVec
	retries      *prometheus.CounterVec
	backups      *prometheus.CounterVec
	skips        *prometheus.CounterVec
	originErrors *prometheus.CounterVec
	duration     *prometheus.HistogramVec
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_node_proxy_requests_total",
			Help: "Visitor requests by site and status class (2xx..5xx), or unknown_host, no_origin, no_publication with site \"\" or the site.",
		}, []string{"site", "code"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_node_proxy_retries_total",
			Help: "Requests retried on another origin of the current level.",
		}, []string{"site"}),
		backups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_node_proxy_backup_requests_total",
			Help: "Requests answered by an origin of the site's backup level (the level the control plane would fail over to next), because every origin of the current level failed or was skipped.",
		}, []string{"site"}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_node_proxy_origin_skips_total",
			Help: "Times an origin was skipped after fail_count failures within fail_window.",
		}, []string{"site", "origin"}),
		originErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_node_proxy_origin_errors_total",
			Help: "Failed attempts on an origin by outcome: connect_error, timeout, http_502, http_503, http_504.",
		}, []string{"site", "origin", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vigil_node_proxy_request_duration_seconds",
			Help:    "Time to serve a visitor request, retries and the response body included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"site"}),
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{m.requests, m.retries, m.backups, m.skips, m.originErrors, m.duration} {
		errs = append(errs, r.Register(c))
	}
	return errors.Join(errs...)
}

// siteMetrics caches one site's request counters and duration histogram, so
// that a request does not hash its label values. Each series is created on
// first use, as WithLabelValues would, so /metrics shows the same series.
type siteMetrics struct {
	codes    [10]atomic.Pointer[prometheus.Counter] // by status class (code/100)
	duration atomic.Pointer[prometheus.Observer]
}

func (sm *siteMetrics) code(m *metrics, site string, class int) prometheus.Counter {
	if class < 0 || class >= len(sm.codes) {
		return m.requests.WithLabelValues(site, strconv.Itoa(class)+"xx")
	}
	if c := sm.codes[class].Load(); c != nil {
		return *c
	}
	c := m.requests.WithLabelValues(site, strconv.Itoa(class)+"xx")
	sm.codes[class].Store(&c)
	return c
}

func (sm *siteMetrics) observer(m *metrics, site string) prometheus.Observer {
	if o := sm.duration.Load(); o != nil {
		return *o
	}
	o := m.duration.WithLabelValues(site)
	sm.duration.Store(&o)
	return o
}

// init creates a new site's request counters of the classes 2xx to 5xx
// and its retry and backup counters at 0, so that the first failures after
// a scrape show in increase() rather than appearing from nothing.
func (sm *siteMetrics) init(m *metrics, site string) {
	for class := 2; class <= 5; class++ {
		sm.code(m, site, class)
	}
	m.retries.WithLabelValues(site)
	m.backups.WithLabelValues(site)
}
