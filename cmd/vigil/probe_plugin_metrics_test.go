package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/dnspup/fakeapi"
)

// TestDnspupQuotaOnMetrics: the dnspup plugin's quota spend reaches the
// agent's /metrics through the SDK's metrics channel, end to end: the
// real agent runs the real vigil-source-dnspup against the fake API,
// which answers 202 (a result to poll) and allows 3 accepted requests.
// The exported counter ends at exactly the requests the API accepted.
func TestDnspupQuotaOnMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	origin := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(origin.Close)
	api := fakeapi.New(fakeapi.Options{Probe: func(context.Context, string) fakeapi.Result {
		return fakeapi.Result{Status: 200, LatencyMs: 1}
	}})
	api.SetAsync(1) // 202, then the result on the first poll
	const quota = 3
	api.SetQuota(quota)
	apiSrv := httptest.NewServer(api)
	t.Cleanup(apiSrv.Close)

	dir := t.TempDir()
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = "300ms"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "checkpoints" {
  plugin  = "vigil-source-dnspup"
  timeout = "3s"
  env     = ["DNSPUP_API_KEY", "DNSPUP_API_SECRET"]
  config {
    api_base    = %q
    checkpoints = ["ams-1"]
  }
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = %q }
  origin "a2" { address = %q }
}
`, filepath.Join(dir, "data"), binDir, apiSrv.URL, origin.URL, origin.URL)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DNSPUP_API_KEY", "k")
	t.Setenv("DNSPUP_API_SECRET", "s")
	agent := startAgentProc(t, config)

	series := func(body, labels string) (float64, bool) {
		re := regexp.MustCompile(`(?m)^vigil_plugin_dnspup_quota_requests_total\{` + regexp.QuoteMeta(labels) + `\} (\S+)$`)
		m := re.FindStringSubmatch(body)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		return v, err == nil
	}
	var body string
	waitFor(t, "the quota spent to reach the API's quota on /metrics", 2*time.Minute, func() bool {
		resp, err := http.Get(agent.api + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		v, ok := series(body, `result="spent",source="checkpoints"`)
		return ok && v == quota
	})
	if n := api.Accepted(); n != quota {
		t.Errorf("the API accepted %d requests, want %d (its quota)", n, quota)
	}
	if v, ok := series(body, `result="uncertain",source="checkpoints"`); !ok || v != 0 {
		t.Errorf("uncertain quota series %v (present %v), want 0: every request got its answer", v, ok)
	}
	if !regexp.MustCompile(`(?m)^# TYPE vigil_plugin_dnspup_quota_requests_total counter$`).MatchString(body) {
		t.Error("vigil_plugin_dnspup_quota_requests_total is not typed a counter")
	}
}
