package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
	"github.com/vigilcdn/vigil/core/store"
)

// BenchmarkMetricsScrape is what a scrape of /metrics costs at 1,000,
// 10,000 and 100,000 sites of two origins (level 1 and 2) after a round
// that probed them all, with the default probe_series_sites (1,000: the
// per-vote series only at the smallest size): the whole page, the whole
// page gzipped, the sites of one prefix (100 sites), and the agent's own
// series alone. Compare B/site and ns/site across the sizes: the cost per
// site should not grow with the fleet. docs/metrics.md quotes a run.
func BenchmarkMetricsScrape(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("sites=%d", n), func(b *testing.B) {
			h := scrapeFleet(b, n)
			for _, c := range []struct{ name, path, encoding string }{
				{"all", "/metrics", ""},
				{"all-gzip", "/metrics", "gzip"},
				{"prefix-100", "/metrics?site=s0000", ""},
				{"agent", "/metrics?collect[]=agent", ""},
			} {
				b.Run(c.name, func(b *testing.B) {
					var size, lines int
					b.ReportAllocs()
					for b.Loop() {
						req := httptest.NewRequest(http.MethodGet, c.path, nil)
						if c.encoding != "" {
							req.Header.Set("Accept-Encoding", c.encoding)
						}
						w := httptest.NewRecorder()
						h.ServeHTTP(w, req)
						if w.Code != http.StatusOK {
							b.Fatalf("%s: %d %s", c.path, w.Code, w.Body)
						}
						size = w.Body.Len()
						lines = bytes.Count(w.Body.Bytes(), []byte("\n"))
					}
					b.ReportMetric(float64(size), "B/scrape")
					if c.encoding == "" {
						b.ReportMetric(float64(lines), "lines/scrape")
					}
					b.ReportMetric(float64(size)/float64(n), "B/site")
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/site")
				})
			}
		})
	}
}

// scrapeFleet is an API handler over an engine of n sites that has run a
// round, serving the engine's registry (with the Go and process
// collectors, as the agent's) on /metrics.
func scrapeFleet(b *testing.B, n int) http.Handler {
	b.Helper()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "control { sites_per_round = %d }\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n", n)
	for i := range n {
		fmt.Fprintf(&cfg, "site \"s%06d\" {\n  hostname = \"s%06d.example.com\"\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" {\n    address = \"http://127.0.0.1:2\"\n    level = 2\n  }\n}\n", i, i)
	}
	st, err := store.Open(b.TempDir(), 0)
	if err != nil {
		b.Fatal(err)
	}
	src := enginetest.NewSource("direct")
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	e, diags := engine.New(context.Background(), enginetest.Config(b, cfg.String()), engine.Options{Store: st, Registerer: reg,
		NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource { return src }})
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	b.Cleanup(func() { e.Close(); st.Close() })
	e.RunRound(context.Background())
	return httpapi.New(httpapi.Options{Engine: e, Gatherer: reg})
}
