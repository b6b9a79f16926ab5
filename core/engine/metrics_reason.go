package engine

import (
	"sync"

	"github.com/vigilcdn/vigil/sdk"
)

// MaxReasonLabels is how many distinct plugin reasons of one source get a
// reason label of their own in vigil_vote_plugin_reasons_total, for the
// life of the process; the votes of any further reason of that source
// count under reason="other". Plugin reasons come from plugins: the bound
// keeps a plugin that invents reasons from growing /metrics without end.
const MaxReasonLabels = 32

// reasonOther is the label of the reasons past MaxReasonLabels. It cannot
// be a plugin reason, which always holds a "/".
const reasonOther = "other"

// pluginReasonKey is one value and plugin reason of a source's votes.
type pluginReasonKey struct {
	value  sdk.Value
	reason string
}

// reasonLabels remembers, per source, the plugin reasons that have a label.
type reasonLabels struct {
	mu   sync.Mutex
	seen map[string]map[string]bool
}

// label is the reason label of reason for source: reason itself, or
// "other" once source has MaxReasonLabels others.
func (l *reasonLabels) label(source, reason string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]map[string]bool{}
	}
	s := l.seen[source]
	if s == nil {
		s = map[string]bool{}
		l.seen[source] = s
	}
	if s[reason] {
		return reason
	}
	if len(s) >= MaxReasonLabels {
		return reasonOther
	}
	s[reason] = true
	return reason
}

// countPluginReason adds n votes of source with k's value and plugin
// reason to vigil_vote_plugin_reasons_total.
func (m *metrics) countPluginReason(source string, k pluginReasonKey, n int) {
	m.pluginReasons.WithLabelValues(source, k.value.String(), m.labels.label(source, k.reason)).Add(float64(n))
}

// joinDetail is a vote's detail with its plugin reason before it, the way
// operators read the two together: "tlscheck/cert_expiring: expires in 3
// days".
func joinDetail(pluginReason, detail string) string {
	if detail == "" {
		return pluginReason
	}
	return pluginReason + ": " + detail
}
