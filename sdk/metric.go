package sdk

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// MetricKind says what a [Metric]'s value is.
type MetricKind int

const (
	// MetricCounter is a total that only grows, from 0 when the plugin's
	// process starts: requests sent, quota spent. Its name ends in
	// "_total".
	MetricCounter MetricKind = 1
	// MetricGauge is a value that goes up and down: a queue's length,
	// quota left.
	MetricGauge MetricKind = 2
)

// String returns "counter", "gauge" or "invalid(N)".
func (k MetricKind) String() string {
	switch k {
	case MetricCounter:
		return "counter"
	case MetricGauge:
		return "gauge"
	}
	return fmt.Sprintf("invalid(%d)", int(k))
}

// Limits of a plugin's metrics. The host drops a series that breaks one,
// and keeps at most MaxMetrics series of one source.
const (
	MaxMetrics          = 64
	MaxMetricName       = 64
	MaxMetricLabels     = 4
	MaxMetricLabelValue = 64
	MaxMetricHelp       = 256
)

// Metric is one series of a plugin's own, which vigil shows on its
// /metrics page beside its own series, as vigil_plugin_<Name> with a
// label source naming the source block (and the series' own Labels). A
// plugin reports its metrics by implementing [MetricsReporter]; a plugin
// in another language fills VoteResponse.metrics (sdk/PROTOCOL.md,
// section 6).
type Metric struct {
	// Name is the plugin's namespace (its short name, as in its plugin
	// reasons) and a name, in snake_case words of lower-case ASCII
	// letters and digits, at most MaxMetricName characters:
	// "dnspup_quota_requests_total". A counter's ends in "_total", a
	// gauge's does not. The namespaces "vigil" and those of vigil's own
	// series about plugins (calls, failures, restarts, dropped, truncated)
	// are not a plugin's.
	Name string
	// Kind is MetricCounter or MetricGauge.
	Kind MetricKind
	// Value is the series' current value: a counter's total since the
	// plugin's process started (never a difference since the last
	// answer), a finite number.
	Value float64
	// Help is one line for operators: what the series counts.
	Help string
	// Labels tell apart the series of one Name: at most MaxMetricLabels,
	// named in snake_case (not "source", which vigil sets), each value at
	// most MaxMetricLabelValue bytes. Keep their values few: each one is a
	// series on every vigil scrape.
	Labels map[string]string
}

// MetricsReporter is implemented by a VoteSource that has metrics of its
// own to show on vigil's /metrics page, such as the quota an upstream API
// charged. After each Vote that returns no error, the SDK calls Metrics
// and sends its answer to vigil with the votes. Metrics returns the
// current value of every series the plugin keeps, every time (a counter
// as its total): vigil shows the last values it got. It is called
// between Vote calls, never during one.
//
// It is optional and part of protocol 2: a host of protocol 1 ignores the
// metrics, and a plugin without them needs nothing.
type MetricsReporter interface {
	Metrics() []Metric
}

// reservedMetricNamespaces are the first words a plugin's metric name may
// not have: vigil's own series about plugins are vigil_plugin_calls_total
// and the like.
var reservedMetricNamespaces = map[string]bool{
	"vigil": true, "calls": true, "failures": true, "restarts": true, "dropped": true, "truncated": true,
}

// CheckMetric returns nil for a series vigil keeps, or an error saying
// what is wrong with it. vigil's host calls it on every series a plugin
// reports; test a plugin's with it (sdktest.CheckMetrics does).
func CheckMetric(m Metric) error {
	if err := checkMetricName(m.Name); err != nil {
		return err
	}
	switch m.Kind {
	case MetricCounter:
		if !strings.HasSuffix(m.Name, "_total") {
			return fmt.Errorf("metric %q: a counter's name ends in _total", m.Name)
		}
		if m.Value < 0 {
			return fmt.Errorf("metric %q: a counter is never negative (got %v)", m.Name, m.Value)
		}
	case MetricGauge:
		if strings.HasSuffix(m.Name, "_total") {
			return fmt.Errorf("metric %q: only a counter's name ends in _total", m.Name)
		}
	default:
		return fmt.Errorf("metric %q: kind %v, want MetricCounter or MetricGauge", m.Name, m.Kind)
	}
	if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
		return fmt.Errorf("metric %q: the value %v is not a finite number", m.Name, m.Value)
	}
	if len(m.Help) > MaxMetricHelp || strings.ContainsAny(m.Help, "\n\r") || !utf8.ValidString(m.Help) {
		return fmt.Errorf("metric %q: the help is one line of UTF-8 of at most %d bytes", m.Name, MaxMetricHelp)
	}
	if len(m.Labels) > MaxMetricLabels {
		return fmt.Errorf("metric %q: %d labels, at most %d", m.Name, len(m.Labels), MaxMetricLabels)
	}
	for k, v := range m.Labels {
		if !snakeCase(k, 32) || k == "source" {
			return fmt.Errorf("metric %q: label name %q: use snake_case of at most 32 characters, not \"source\" (vigil sets it)", m.Name, k)
		}
		if len(v) > MaxMetricLabelValue || !utf8.ValidString(v) {
			return fmt.Errorf("metric %q: label %s: the value is UTF-8 of at most %d bytes", m.Name, k, MaxMetricLabelValue)
		}
	}
	return nil
}

func checkMetricName(name string) error {
	if !snakeCase(name, MaxMetricName) || !strings.Contains(name, "_") {
		return fmt.Errorf("metric name %q: use the plugin's namespace and a name, snake_case of lower-case letters and digits, at most %d characters, such as \"dnspup_quota_requests_total\"", name, MaxMetricName)
	}
	ns, _, _ := strings.Cut(name, "_")
	if reservedMetricNamespaces[ns] {
		return fmt.Errorf("metric name %q: the namespace %q is vigil's: use the plugin's own", name, ns)
	}
	return nil
}

// snakeCase reports whether s is words of lower-case ASCII letters and
// digits joined by single "_", starting with a letter, at most max long.
func snakeCase(s string, max int) bool {
	if s == "" || len(s) > max || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '_' && s[i-1] != '_':
		default:
			return false
		}
	}
	return true
}

// ErrTooManyMetrics is wrapped by the error of CheckMetrics for series
// past MaxMetrics.
var ErrTooManyMetrics = errors.New("too many metric series")

// CheckMetrics checks every series of one answer, as vigil does: each with
// CheckMetric (a name's kind follows from it: only a counter's ends in
// _total), no two with the same name and labels, at most MaxMetrics. It returns what vigil keeps and an error
// for each series it drops, in order.
func CheckMetrics(ms []Metric) (kept []Metric, errs []error) {
	seen := map[string]bool{}
	for _, m := range ms {
		if err := CheckMetric(m); err != nil {
			errs = append(errs, err)
			continue
		}
		key := MetricKey(m)
		if seen[key] {
			errs = append(errs, fmt.Errorf("metric %q: a second series with the labels %v", m.Name, m.Labels))
			continue
		}
		if len(kept) >= MaxMetrics {
			errs = append(errs, fmt.Errorf("metric %q: %w: at most %d series", m.Name, ErrTooManyMetrics, MaxMetrics))
			continue
		}
		seen[key] = true
		kept = append(kept, m)
	}
	return kept, errs
}

// MetricKey identifies a series: its name and its labels, sorted.
func MetricKey(m Metric) string {
	if len(m.Labels) == 0 {
		return m.Name
	}
	keys := make([]string, 0, len(m.Labels))
	for k := range m.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(m.Name)
	for _, k := range keys {
		b.WriteString("\x00" + k + "\x00" + m.Labels[k])
	}
	return b.String()
}
