package pluginhost

import (
	"context"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/sdk"
)

// TestPluginMetrics: a real plugin process's own metrics come with its
// votes; the host keeps the latest answer's, drops the malformed series
// and says so in the log once, not at every answer.
func TestPluginMetrics(t *testing.T) {
	src, logs := newSource(t, `voter = "v"`, nil)
	if got := src.Metrics(); len(got) != 0 {
		t.Fatalf("metrics %+v before any answer carried some", got)
	}
	for round := 1; round <= 3; round++ {
		votes, err := src.Vote(context.Background(), ballot("metrics", 2))
		if err != nil || len(votes) != 2 {
			t.Fatalf("round %d: votes %v, err %v", round, votes, err)
		}
		got := src.Metrics()
		want := sdk.Metric{Name: "testsource_metric_votes_total", Kind: sdk.MetricCounter, Value: float64(round), Help: "Ballots of site metrics."}
		if len(got) != 1 || got[0].Name != want.Name || got[0].Kind != want.Kind || got[0].Value != want.Value || got[0].Help != want.Help {
			t.Errorf("round %d: metrics %+v, want only %+v", round, got, want)
		}
	}
	if n := strings.Count(logs.String(), "dropped metrics of the vote source's plugin"); n != 1 {
		t.Errorf("the dropped series was logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), `Bad Name`) {
		t.Errorf("the log does not name the dropped series:\n%s", logs)
	}
}
