package httpapi_test

import (
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

var updateMetrics = flag.Bool("update-metrics", false, "rewrite testdata/metrics-sites.golden")

// TestMetricsSitePageIsGolden pins the per-site part of /metrics (every
// group but the agent's) of a small fleet after rounds that made an
// origin unhealthy: testdata/metrics-sites.golden was written by the
// registry of const metrics that /metrics served before the per-site
// gatherer, and the gatherer serves it line for line.
func TestMetricsSitePageIsGolden(t *testing.T) {
	src := enginetest.Sources{}
	e, _ := enginetest.Start(t, enginetest.Config(t, metricsCfg), src, "")
	e.RunRound(context.Background())
	src["direct"].SetDown("shop-b", "a2", true)
	src["direct"].SetDown("www", "a1", true)
	for range 3 {
		e.RunRound(context.Background())
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e, MaxWait: 5 * time.Second}))
	t.Cleanup(srv.Close)
	resp, got := scrape(t, srv, "/metrics?collect[]=site&collect[]=origin&collect[]=probe", "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	path := filepath.Join("testdata", "metrics-sites.golden")
	if *updateMetrics {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./core/httpapi/ -run TestMetricsSitePageIsGolden -args -update-metrics writes it)", err)
	}
	g, w := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			t.Fatalf("line %d is %q, the golden page's %q", i+1, g[i], w[i])
		}
	}
	if len(g) != len(w) {
		t.Fatalf("%d lines, the golden page %d", len(g), len(w))
	}
	if !strings.Contains(got, `vigil_origin_state{origin="a2",site="shop-b",state="unhealthy"} 1`) {
		t.Errorf("shop-b's a2 is not unhealthy: the page no longer covers a state change")
	}
}
