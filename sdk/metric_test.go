package sdk_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/sdk"
)

// TestCheckMetric: what vigil keeps of a plugin's series, and the error
// naming what is wrong with the rest.
func TestCheckMetric(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    sdk.Metric
		want string // a part of the error; "" to keep it
	}{
		{"counter", sdk.Metric{Name: "dnspup_quota_requests_total", Kind: sdk.MetricCounter, Value: 3, Labels: map[string]string{"result": "spent"}}, ""},
		{"gauge", sdk.Metric{Name: "tlscheck_certs_expiring", Kind: sdk.MetricGauge, Value: -2, Help: "certificates expiring in 14 days"}, ""},
		{"no namespace", sdk.Metric{Name: "requests", Kind: sdk.MetricGauge}, "namespace"},
		{"upper case", sdk.Metric{Name: "dnspup_Quota", Kind: sdk.MetricGauge}, "snake_case"},
		{"double underscore", sdk.Metric{Name: "dnspup__quota", Kind: sdk.MetricGauge}, "snake_case"},
		{"too long", sdk.Metric{Name: "dnspup_" + strings.Repeat("a", 60), Kind: sdk.MetricGauge}, "at most 64"},
		{"vigil's namespace", sdk.Metric{Name: "calls_total", Kind: sdk.MetricCounter}, "vigil's"},
		{"counter without _total", sdk.Metric{Name: "dnspup_quota", Kind: sdk.MetricCounter}, "ends in _total"},
		{"gauge with _total", sdk.Metric{Name: "dnspup_quota_total", Kind: sdk.MetricGauge}, "only a counter"},
		{"negative counter", sdk.Metric{Name: "dnspup_quota_total", Kind: sdk.MetricCounter, Value: -1}, "never negative"},
		{"no kind", sdk.Metric{Name: "dnspup_quota"}, "kind"},
		{"NaN", sdk.Metric{Name: "dnspup_quota", Kind: sdk.MetricGauge, Value: math.NaN()}, "finite"},
		{"two-line help", sdk.Metric{Name: "dnspup_quota", Kind: sdk.MetricGauge, Help: "a\nb"}, "one line"},
		{"label source", sdk.Metric{Name: "dnspup_quota", Kind: sdk.MetricGauge, Labels: map[string]string{"source": "x"}}, `not "source"`},
		{"long label value", sdk.Metric{Name: "dnspup_quota", Kind: sdk.MetricGauge, Labels: map[string]string{"id": strings.Repeat("x", 65)}}, "at most 64 bytes"},
		{"five labels", sdk.Metric{Name: "dnspup_quota", Kind: sdk.MetricGauge, Labels: map[string]string{"a": "", "b": "", "c": "", "d": "", "e": ""}}, "at most 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sdk.CheckMetric(tc.m)
			if tc.want == "" {
				if err != nil {
					t.Errorf("CheckMetric = %v, want it kept", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckMetric = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestCheckMetrics: one answer's series: duplicates and the series past
// MaxMetrics are dropped, each with its error; one name may have several
// series with different labels.
func TestCheckMetrics(t *testing.T) {
	spent := sdk.Metric{Name: "dnspup_quota_requests_total", Kind: sdk.MetricCounter, Value: 1, Labels: map[string]string{"result": "spent"}}
	uncertain := sdk.Metric{Name: "dnspup_quota_requests_total", Kind: sdk.MetricCounter, Value: 1, Labels: map[string]string{"result": "uncertain"}}
	ms := []sdk.Metric{spent, uncertain, spent, {Name: "dnspup_quota_requests", Kind: sdk.MetricGauge}, {Name: "bad"}}
	kept, errs := sdk.CheckMetrics(ms)
	if len(kept) != 3 || len(errs) != 2 {
		t.Fatalf("kept %d, %d errors (%v); want 3 kept, the duplicate and the bad name refused", len(kept), len(errs), errs)
	}
	if !strings.Contains(errs[0].Error(), "second series") {
		t.Errorf("first error %v, want the duplicate", errs[0])
	}
	many := make([]sdk.Metric, sdk.MaxMetrics+2)
	for i := range many {
		many[i] = sdk.Metric{Name: "x_queue", Kind: sdk.MetricGauge, Labels: map[string]string{"n": strconv.Itoa(i)}}
	}
	kept, errs = sdk.CheckMetrics(many)
	if len(kept) != sdk.MaxMetrics || len(errs) != 2 || !errors.Is(errs[0], sdk.ErrTooManyMetrics) {
		t.Errorf("kept %d, errors %v; want %d kept and 2 ErrTooManyMetrics", len(kept), errs, sdk.MaxMetrics)
	}
	twoKinds := []sdk.Metric{{Name: "x_n", Kind: sdk.MetricGauge}, {Name: "x_n", Kind: sdk.MetricGauge, Labels: map[string]string{"a": "b"}}}
	if _, errs := sdk.CheckMetrics(twoKinds); len(errs) != 0 {
		t.Errorf("two series of one gauge refused: %v", errs)
	}
}
