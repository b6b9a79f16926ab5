package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

const metricsCfg = `
source "direct" { plugin = "vigil-source-direct" }
site "shop-a" {
  hostname = "a.shop.example.com"
  origin "a1" { address = "http://127.0.0.1:18101" }
  origin "b1" {
    address = "http://127.0.0.1:18102"
    level   = 2
  }
}
site "shop-b" {
  hostname = "b.shop.example.com"
  origin "a1" { address = "http://127.0.0.1:18103" }
  origin "a2" { address = "http://127.0.0.1:18104" }
}
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18105" }
  origin "b1" {
    address = "http://127.0.0.1:18106"
    level   = 2
  }
}
`

func metricsServer(t *testing.T) *httptest.Server {
	t.Helper()
	e, _ := enginetest.Start(t, enginetest.Config(t, metricsCfg), enginetest.Sources{}, "")
	e.RunRound(context.Background())
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e, MaxWait: 5 * time.Second}))
	t.Cleanup(srv.Close)
	return srv
}

func scrape(t *testing.T, srv *httptest.Server, path, accept string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestMetricsSubset: site=PREFIX keeps the per-site series of the sites
// it starts, collect[]=GROUP keeps the groups asked for, and a bad
// parameter is a 400 that names it.
func TestMetricsSubset(t *testing.T) {
	srv := metricsServer(t)
	for _, tt := range []struct {
		name, query string
		want, not   []string
	}{
		{"everything", "", []string{
			"# TYPE go_goroutines gauge", `vigil_site_level{site="shop-a"} 1`, `vigil_site_level{site="www"} 1`,
			`vigil_origin_state{origin="a1",site="shop-b",state="healthy"} 0`,
			`vigil_origin_info{address="http://127.0.0.1:18106",level="2",origin="b1",site="www"} 1`,
			`vigil_probe_success{origin="a1",site="shop-a",source="direct",voter="direct"} 1`,
		}, nil},
		{"a prefix", "?site=shop-", []string{
			"# TYPE go_goroutines gauge", `vigil_site_level{site="shop-a"} 1`, `vigil_site_level{site="shop-b"} 1`,
			`vigil_probe_success{origin="a2",site="shop-b",source="direct",voter="direct"} 1`,
		}, []string{`site="www"`}},
		{"a prefix no site has", "?site=zz", []string{"# TYPE go_goroutines gauge"}, []string{"vigil_site_level", "vigil_origin_state"}},
		{"the site group", "?collect[]=site", []string{`vigil_site_level{site="www"} 1`, `vigil_site_unhealthy_threshold{site="shop-b"} 3`},
			[]string{"vigil_origin_state", "vigil_probe_success", "go_goroutines"}},
		{"origin and probe of one site", "?collect[]=origin&collect[]=probe&site=www", []string{
			`vigil_origin_consecutive_successes{origin="b1",site="www"} 1`,
			`vigil_origin_info{address="http://127.0.0.1:18105",level="1",origin="a1",site="www"} 1`,
			`vigil_probe_reason{origin="a1",reason="ok",site="www",source="direct",voter="direct"} 1`,
		}, []string{"vigil_site_level", "go_goroutines", `site="shop-a"`}},
		{"the agent alone", "?collect[]=agent", []string{"# TYPE go_goroutines gauge"}, []string{"vigil_site_level", "vigil_origin_", "vigil_probe_"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := scrape(t, srv, "/metrics"+tt.query, "")
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w+"\n") {
					t.Errorf("lacks %s", w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(body, n) {
					t.Errorf("has %s, which the subset leaves out", n)
				}
			}
		})
	}
	for _, tt := range []struct{ name, query, says string }{
		{"unknown group", "?collect[]=sites", "collect[]=\\\"sites\\\""},
		{"unknown parameter", "?prefix=shop", "parameter \\\"prefix\\\""},
		{"two prefixes", "?site=a&site=b", "one site prefix"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := scrape(t, srv, "/metrics"+tt.query, "")
			if resp.StatusCode != 400 || !strings.Contains(body, tt.says) || !strings.Contains(body, "agent, site, origin, probe") {
				t.Fatalf("status %d, body %s; want 400 naming %s and the groups", resp.StatusCode, body, tt.says)
			}
		})
	}
}

// TestMetricsNegotiation: /metrics answers in the format the scraper asks
// for: the text format by default, OpenMetrics and protobuf on request.
func TestMetricsNegotiation(t *testing.T) {
	srv := metricsServer(t)
	for _, tt := range []struct {
		name, accept, contentType string
		check                     func(t *testing.T, body string)
	}{
		{"text by default", "", "text/plain; version=0.0.4", func(t *testing.T, body string) {
			if !strings.Contains(body, "# TYPE vigil_site_level gauge\n") || strings.Contains(body, "# EOF") {
				t.Errorf("not the text format:\n%.300s", body)
			}
		}},
		{"OpenMetrics", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5", "application/openmetrics-text; version=1.0.0", func(t *testing.T, body string) {
			for _, w := range []string{"# TYPE go_gc_duration_seconds summary\n", `vigil_site_level{site="www"} 1.0` + "\n"} {
				if !strings.Contains(body, w) {
					t.Errorf("lacks %q", w)
				}
			}
			if !strings.HasSuffix(body, "# EOF\n") {
				t.Errorf("does not end with # EOF")
			}
		}},
		{"protobuf", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", "application/vnd.google.protobuf", func(t *testing.T, body string) {
			dec := expfmt.NewDecoder(strings.NewReader(body), expfmt.NewFormat(expfmt.TypeProtoDelim))
			found := false
			for {
				var mf dto.MetricFamily
				if err := dec.Decode(&mf); err != nil {
					break
				}
				if mf.GetName() == "vigil_origin_info" && len(mf.GetMetric()) == 6 {
					found = true
				}
			}
			if !found {
				t.Errorf("no vigil_origin_info family of 6 origins decoded")
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := scrape(t, srv, "/metrics", tt.accept)
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tt.contentType) {
				t.Fatalf("Content-Type %q, want %q", ct, tt.contentType)
			}
			tt.check(t, body)
		})
	}
}
