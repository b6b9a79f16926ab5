package dnspup_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/dnspup/fakeapi"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// TestPluginSubprocess runs vigil-source-dnspup as vigil does (handshake,
// AutoMTLS, only the listed environment) against the fake API, whose
// checkpoints really fetch two loopback origins.
func TestPluginSubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the plugin binary")
	}
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cdn-health" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("OK"))
	}))
	t.Cleanup(healthy.Close)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusBadGateway)
	}))
	t.Cleanup(failing.Close)
	fake := fakeapi.New(fakeapi.Options{Key: testKey, Secret: testSecret, Probe: fakeapi.FetchProbe(5 * time.Second)})
	api := httptest.NewServer(fake)
	t.Cleanup(api.Close)

	bin := sdktest.Build(t, "./cmd/vigil-source-dnspup")
	src := sdktest.Launch(t, bin, "PUP_KEY="+testKey, "PUP_SECRET="+testSecret)

	base := map[string]any{
		"api_base":        api.URL,
		"api_key_env":     "PUP_KEY",
		"api_secret_env":  "PUP_SECRET",
		"request_timeout": 5 * time.Second,
	}
	with := func(k string, v any) sdk.Config {
		m := map[string]any{}
		for a, b := range base {
			m[a] = b
		}
		m[k] = v
		return sdk.Config{Values: m}
	}

	t.Run("unknown checkpoint", func(t *testing.T) {
		err := sdktest.ConfigureErr(t, src, with("checkpoints", []string{"ams-1", "zrh-7"}))
		var diags sdk.Diagnostics
		if !errors.As(err, &diags) || diags[0].AttributePath != "checkpoints[1]" || !strings.Contains(err.Error(), "zrh-7") {
			t.Fatalf("Configure = %v, want a diagnostic at checkpoints[1]", err)
		}
	})
	t.Run("vote", func(t *testing.T) {
		sdktest.Configure(t, src, with("checkpoints", []string{"ams-1", "nyc-1"}))
		ballot := sdk.Ballot{Round: 7, Targets: []sdk.Target{
			{Site: "www", Origin: "a1", Address: healthy.URL, Host: "www.example.com", Path: "/cdn-health"},
			{Site: "www", Origin: "a2", Address: failing.URL, Host: "www.example.com", Path: "/cdn-health"},
		}}
		votes, err := src.Vote(t.Context(), ballot)
		if err != nil {
			t.Fatal(err)
		}
		sdktest.CheckVotes(t, ballot, votes)
		want := []string{
			"www/a1 dnspup:ams-1 up ok", "www/a1 dnspup:nyc-1 up ok",
			"www/a2 dnspup:ams-1 down http_5xx", "www/a2 dnspup:nyc-1 down http_5xx",
		}
		if got := summary(votes); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("votes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("abstentions", func(t *testing.T) {
		cfg := with("checkpoints", []string{"ams-1"})
		cfg.Values["requests_per_round"], cfg.Values["batch_size"] = 1.0, 1.0
		sdktest.Configure(t, src, cfg)
		ballot := sdk.Ballot{Targets: []sdk.Target{
			{Site: "www", Origin: "a1", Address: healthy.URL, Path: "/cdn-health"},
			{Site: "www", Origin: "b1", Address: healthy.URL + "/", Path: "/other"},
			{Site: "www", Origin: "c1", Address: healthy.URL, Path: "/cdn-health", Expect: sdk.Expectations{BodyContains: "OK"}},
		}}
		judged := map[string]bool{}
		for round := range 2 {
			votes, err := src.Vote(t.Context(), ballot)
			if err != nil {
				t.Fatal(err)
			}
			sdktest.CheckVotes(t, ballot, votes)
			reasons := map[sdk.Reason]int{}
			for _, v := range votes {
				if v.Value == sdk.Abstain {
					reasons[v.Reason]++
				} else {
					judged[v.Origin] = true
				}
			}
			if reasons[sdk.ReasonOverBudget] != 1 || reasons[sdk.ReasonUnsupported] != 1 || len(votes) != 3 {
				t.Errorf("round %d: votes %v, want one checkpoint vote, one over_budget and one unsupported", round, summary(votes))
			}
		}
		if !judged["a1"] || !judged["b1"] {
			t.Errorf("in two rounds judged %v, want a1 and b1 (the cut rotates)", judged)
		}
	})
	t.Run("unauthorized abstains", func(t *testing.T) {
		sdktest.Configure(t, src, with("checkpoints", []string{"ams-1"}))
		fake.FailNext("unauthorized", 0, 0)
		t.Cleanup(func() { fake.FailNext("", 0, 0) })
		ballot := sdk.Ballot{Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: healthy.URL, Path: "/cdn-health"}}}
		for range 2 {
			votes, err := src.Vote(t.Context(), ballot)
			if len(votes) != 0 || err == nil {
				t.Fatalf("votes %v, err %v; want an abstention", votes, err)
			}
		}
		if n := fake.Count("/v1/batch-probes"); n != 2 { // one in "vote", one here ("abstentions" sends single probes)
			t.Errorf("batch-probes sent %d times in total, want 2 (no calls after a 401)", n)
		}
	})
}
