package pluginhost

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/host"
)

// vote asks the plugin for its votes and, when its answer carries them,
// its own metrics (sdk.MetricsReporter).
func vote(p *process, ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, []sdk.Metric, error) {
	if mv, ok := p.src.(host.MetricsVoter); ok {
		return mv.VoteWithMetrics(ctx, ballot)
	}
	votes, err := p.src.Vote(ctx, ballot)
	return votes, nil, err
}

// keepMetrics checks the metrics of one answer (sdk.CheckMetrics) and
// keeps them as the source's latest: each answer carries every series the
// plugin keeps, so the series of an earlier answer that this one lacks
// are gone. A series vigil drops is logged, once until the problems
// change.
func (s *Source) keepMetrics(ms []sdk.Metric) {
	kept, errs := sdk.CheckMetrics(ms)
	slices.SortFunc(kept, func(a, b sdk.Metric) int { return cmp.Compare(sdk.MetricKey(a), sdk.MetricKey(b)) })
	problems := ""
	if len(errs) > 0 {
		problems = errors.Join(errs...).Error()
	}
	s.mu.Lock()
	s.metrics = kept
	warn := problems != s.metricProblems
	s.metricProblems = problems
	s.mu.Unlock()
	if warn && problems != "" {
		s.log.Warn("dropped metrics of the vote source's plugin: fix the plugin's Metrics (sdk.CheckMetric says what vigil keeps)",
			"dropped", len(errs), "kept", len(kept), "first", errs[0].Error())
	}
}

// Metrics returns the plugin's own series from its latest answer that
// carried any, checked and sorted by name and labels; vigil exports each
// as vigil_plugin_<name> with a label source.
func (s *Source) Metrics() []sdk.Metric {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.metrics)
}
