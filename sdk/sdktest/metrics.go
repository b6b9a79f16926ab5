package sdktest

import (
	"context"
	"testing"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/host"
)

// VoteMetrics asks src, from InProcess or Launch, to vote on ballot and
// returns its votes and the metrics it sent with them (sdk.MetricsReporter),
// as vigil reads both. It fails the test when the call fails, and for
// every series vigil would drop (sdk.CheckMetrics). Check the votes with
// CheckVotes.
func VoteMetrics(t testing.TB, ctx context.Context, src sdk.VoteSource, ballot sdk.Ballot) ([]sdk.Vote, []sdk.Metric) {
	t.Helper()
	mv, ok := src.(host.MetricsVoter)
	if !ok {
		t.Fatalf("sdktest: VoteMetrics needs the client of InProcess or Launch, not a %T", src)
	}
	votes, metrics, err := mv.VoteWithMetrics(ctx, ballot)
	if err != nil {
		t.Fatalf("sdktest: Vote: %v", err)
	}
	kept, errs := sdk.CheckMetrics(metrics)
	for _, err := range errs {
		t.Errorf("vigil would drop this series: %v", err)
	}
	return votes, kept
}
