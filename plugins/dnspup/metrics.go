package dnspup

import (
	"maps"
	"slices"

	"github.com/vigilcdn/vigil/sdk"
)

var _ sdk.MetricsReporter = (*Source)(nil)

// Metrics implements sdk.MetricsReporter: the source's counters, which
// vigil shows as vigil_plugin_<name>{source=...}:
//
//   - dnspup_quota_requests_total{result}: probe requests (POSTs) counted
//     against the dnspup quota, "spent" (accepted, 200 or 202) and
//     "uncertain" (sent, no answer: dnspup may have charged it); both from
//     0 at the start (QuotaSpend).
//   - dnspup_requests_total{result}: probe requests sent, by result: "ok",
//     "pending", "out_of_time" or the error class (Requests).
//   - dnspup_unjudged_targets_total{reason}: targets the source did not
//     judge, by reason (Abstentions).
//
// vigil gets them with each Vote answer that is not an error: a round that
// fails as a whole (every request refused) leaves the last values shown
// until the next answer.
func (s *Source) Metrics() []sdk.Metric {
	quota := s.quota.snapshot()
	out := []sdk.Metric{
		{Name: "dnspup_quota_requests_total", Kind: sdk.MetricCounter, Value: float64(quota[quotaSpent]),
			Help:   "dnspup probe requests (POSTs) that cost quota: accepted (spent) or sent without an answer (uncertain).",
			Labels: map[string]string{"result": quotaSpent}},
		{Name: "dnspup_quota_requests_total", Kind: sdk.MetricCounter, Value: float64(quota[quotaUncertain]),
			Help:   "dnspup probe requests (POSTs) that cost quota: accepted (spent) or sent without an answer (uncertain).",
			Labels: map[string]string{"result": quotaUncertain}},
	}
	out = appendCounters(out, "dnspup_requests_total", "result", "dnspup probe requests sent, by result (ok, pending, out_of_time or the error class).", s.requests.snapshot())
	out = appendCounters(out, "dnspup_unjudged_targets_total", "reason", "Targets the dnspup source did not judge, by reason.", s.abstentions.snapshot())
	return out
}

// appendCounters appends one counter series per label value of m, in
// label order.
func appendCounters(out []sdk.Metric, name, label, help string, m map[string]uint64) []sdk.Metric {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, sdk.Metric{Name: name, Kind: sdk.MetricCounter, Value: float64(m[k]), Help: help, Labels: map[string]string{label: k}})
	}
	return out
}
