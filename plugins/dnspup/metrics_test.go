package dnspup_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/dnspup/fakeapi"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// TestPluginMetrics: the built plugin, run as vigil runs it, sends its
// counters with each answer (sdk.MetricsReporter), each one vigil keeps:
// the quota spent is the requests the fake API accepted, here answered
// 202 and polled, with the node list in pages.
func TestPluginMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the plugin binary")
	}
	origin := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(origin.Close)
	fake := fakeapi.New(fakeapi.Options{Key: testKey, Secret: testSecret, Probe: fakeapi.FetchProbe(5 * time.Second)})
	fake.SetAsync(2)
	fake.SetPageSize(1)
	api := httptest.NewServer(fake)
	t.Cleanup(api.Close)
	src := sdktest.Launch(t, sdktest.Build(t, "./cmd/vigil-source-dnspup"), "PUP_KEY="+testKey, "PUP_SECRET="+testSecret)
	sdktest.Configure(t, src, sdk.Config{Values: map[string]any{
		"api_base": api.URL, "api_key_env": "PUP_KEY", "api_secret_env": "PUP_SECRET",
		"request_timeout": 5 * time.Second, "checkpoints": []string{"ams-1", "nyc-1"},
	}})
	ballot := sdk.Ballot{Round: 1, Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: origin.URL, Host: "www.example.com", Path: "/"}}}
	for round := 1; round <= 2; round++ {
		votes, metrics := sdktest.VoteMetrics(t, t.Context(), src, ballot)
		sdktest.CheckVotes(t, ballot, votes)
		if len(votes) != 2 || votes[0].Value != sdk.Up {
			t.Fatalf("round %d: votes %+v, want two up votes", round, votes)
		}
		got := map[string]float64{}
		for _, m := range metrics {
			for k, v := range m.Labels {
				got[m.Name+"{"+k+"="+v+"}"] = m.Value
			}
		}
		want := map[string]float64{
			"dnspup_quota_requests_total{result=spent}":     float64(fake.Accepted()),
			"dnspup_quota_requests_total{result=uncertain}": 0,
			"dnspup_requests_total{result=ok}":              float64(round),
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("round %d: %s = %v, want %v (all: %v)", round, k, got[k], v, got)
			}
		}
		if fake.Accepted() != round {
			t.Errorf("round %d: the API accepted %d requests, want one a round", round, fake.Accepted())
		}
	}
}
