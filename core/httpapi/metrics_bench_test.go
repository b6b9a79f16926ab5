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
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
// series alone; and, side by side, the whole page made as /metrics made
// it before engine.Views.SiteGatherer (all-registry: the per-site series
// as const metrics gathered by a registry of their own, which checks,
// hashes and sorts them), after checking that both make the same
// per-site page. Compare B/site and ns/site across the sizes: the cost
// per site should not grow with the fleet. docs/metrics.md quotes a run.
func BenchmarkMetricsScrape(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("sites=%d", n), func(b *testing.B) {
			h, e, reg := scrapeFleet(b, n)
			registry := registryPage(e, reg)
			sites := "/metrics?collect[]=site&collect[]=origin&collect[]=probe"
			if got, want := get(b, h, sites, ""), get(b, registry, sites, ""); !bytes.Equal(got.Bytes(), want.Bytes()) {
				b.Fatalf("the per-site page (%d bytes) is not the registry's (%d bytes)", got.Len(), want.Len())
			}
			for _, c := range []struct {
				name, path, encoding string
				h                    http.Handler
			}{
				{"all", "/metrics", "", h},
				{"all-registry", "/metrics", "", registry},
				{"all-gzip", "/metrics", "gzip", h},
				{"prefix-100", "/metrics?site=s0000", "", h},
				{"agent", "/metrics?collect[]=agent", "", h},
			} {
				b.Run(c.name, func(b *testing.B) {
					var size, lines int
					b.ReportAllocs()
					for b.Loop() {
						req := httptest.NewRequest(http.MethodGet, c.path, nil)
						if c.encoding != "" {
							req.Header.Set("Accept-Encoding", c.encoding)
						}
						w := &countingWriter{header: http.Header{}}
						c.h.ServeHTTP(w, req)
						if w.code != 0 && w.code != http.StatusOK {
							b.Fatalf("%s: %d", c.path, w.code)
						}
						size, lines = w.size, w.lines
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

// countingWriter is a response writer that keeps only the status, the
// size and the lines of the body: a scrape's cost without a recorder's
// copy of the page (a server streams it to the socket).
type countingWriter struct {
	header      http.Header
	code        int
	size, lines int
}

func (w *countingWriter) Header() http.Header  { return w.header }
func (w *countingWriter) WriteHeader(code int) { w.code = code }
func (w *countingWriter) Write(p []byte) (int, error) {
	w.size += len(p)
	w.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

// get serves one GET of path by h and returns the body.
func get(b *testing.B, h http.Handler, path, encoding string) *bytes.Buffer {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("%s: %d %s", path, w.Code, w.Body)
	}
	return w.Body
}

// registryPage serves /metrics as the API did before
// engine.Views.SiteGatherer: the agent's registry and, for each scrape, a
// registry of the per-site const metrics (engine.Views.SiteCollector),
// through promhttp with the API's options. It takes collect[] but not
// site=.
func registryPage(e *engine.Engine, agent prometheus.Gatherer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sel engine.SiteMetrics
		var gs httpapi.PageGatherer
		groups := r.URL.Query()["collect[]"]
		if len(groups) == 0 {
			gs, sel = append(gs, agent), engine.AllSiteMetrics
		}
		for _, g := range groups {
			sel.Sites = sel.Sites || g == engine.MetricsGroupSite
			sel.Origins = sel.Origins || g == engine.MetricsGroupOrigin
			sel.Probes = sel.Probes || g == engine.MetricsGroupProbe
		}
		sites := prometheus.NewRegistry()
		sites.MustRegister(e.Views().SiteCollector(sel))
		gs = append(gs, sites)
		promhttp.HandlerFor(gs, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	})
}

// scrapeFleet is an API handler over an engine of n sites that has run a
// round, serving the engine's registry (with the Go and process
// collectors, as the agent's) on /metrics.
func scrapeFleet(b *testing.B, n int) (http.Handler, *engine.Engine, prometheus.Gatherer) {
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
	return httpapi.New(httpapi.Options{Engine: e, Gatherer: reg}), e, reg
}
