package sdktest_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// metered is a vote source with metrics of its own: a counter of the
// targets it voted on, and one malformed series vigil drops.
type metered struct {
	sdk.VoteSource
	voted atomic.Int64
}

func (m *metered) Info(context.Context) (sdk.Info, error) { return sdk.Info{Name: "metered"}, nil }
func (m *metered) ConfigSchema(context.Context) (sdk.Schema, error) {
	return sdk.Schema{}, nil
}
func (m *metered) Configure(context.Context, sdk.Config) error { return nil }
func (m *metered) Vote(_ context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	votes := make([]sdk.Vote, len(b.Targets))
	for i, t := range b.Targets {
		votes[i] = sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: "m", Value: sdk.Down, Reason: sdk.ReasonTimeout}
	}
	m.voted.Add(int64(len(b.Targets)))
	return votes, nil
}

func (m *metered) Metrics() []sdk.Metric {
	return []sdk.Metric{
		{Name: "metered_targets_total", Kind: sdk.MetricCounter, Value: float64(m.voted.Load()), Help: "targets voted on", Labels: map[string]string{"kind": "all"}},
	}
}

// TestVoteMetrics: a plugin's metrics travel with its Vote answers over
// real gRPC, as totals: the second answer carries the sum of both rounds.
func TestVoteMetrics(t *testing.T) {
	src := sdktest.InProcess(t, &metered{})
	ctx := context.Background()
	ballot := sdk.Ballot{Round: 1, Targets: []sdk.Target{{Site: "www", Origin: "a1"}, {Site: "www", Origin: "a2"}}}
	for round, want := range []float64{2, 4} {
		votes, metrics := sdktest.VoteMetrics(t, ctx, src, ballot)
		sdktest.CheckVotes(t, ballot, votes)
		if len(metrics) != 1 || metrics[0].Name != "metered_targets_total" || metrics[0].Kind != sdk.MetricCounter ||
			metrics[0].Value != want || metrics[0].Labels["kind"] != "all" || metrics[0].Help != "targets voted on" {
			t.Errorf("round %d: metrics %+v, want metered_targets_total{kind=all} %v", round+1, metrics, want)
		}
	}
}
