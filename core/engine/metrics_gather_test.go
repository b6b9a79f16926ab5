package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

// scriptSource votes on every target with several voters whose names
// do not sort in the order they vote, each vote's value, reason, latency
// and HTTP fields drawn from a hash of the site, origin, voter and
// round: up, down and abstentions, status codes, phase times, certificate
// expiries and none.
type scriptSource struct {
	name   string
	voters []string
	mu     sync.Mutex
	round  int
}

func (s *scriptSource) Name() string                          { return s.name }
func (s *scriptSource) Start(context.Context) hcl.Diagnostics { return nil }
func (s *scriptSource) Close()                                {}

func (s *scriptSource) Vote(_ context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	s.mu.Lock()
	s.round++
	round := s.round
	s.mu.Unlock()
	var out []sdk.Vote
	for _, t := range b.Targets {
		for _, voter := range s.voters {
			f := fnv.New32a()
			fmt.Fprintf(f, "%s/%s/%s/%d", t.Site, t.Origin, voter, round)
			h := f.Sum32()
			v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: voter, Value: sdk.Up, Reason: sdk.ReasonOK,
				Latency: time.Duration(h%5000000) * time.Microsecond / 7}
			switch h % 5 {
			case 0:
				v.Value, v.Reason = sdk.Down, sdk.ReasonTimeout
			case 1:
				v.Value, v.Reason = sdk.Down, sdk.ReasonHTTP5xx
			case 2:
				v.Value, v.Reason = sdk.Abstain, sdk.ReasonUnspecified
			}
			if h%3 != 0 {
				v.HTTP = &sdk.HTTPProbe{StatusCode: []int{200, 503, 0}[h%3], Resolve: time.Duration(h % 1000),
					Connect: time.Duration(h%7) * time.Millisecond, Processing: time.Duration(h%100000) * time.Microsecond}
				if h%4 == 0 {
					v.HTTP.TLS = time.Duration(h%13) * time.Millisecond
					v.HTTP.CertNotAfter = time.Unix(1900000000+int64(h%100000), 0)
				}
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// scrapeConfig is a fleet whose site and origin names sort in other
// orders than they are declared (upper case, digits), with one to three
// levels, some sites with a failback ramp.
func scrapeConfig(sites int) string {
	var c strings.Builder
	c.WriteString("source \"edge\" { plugin = \"vigil-source-node\" }\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n")
	origins := []string{"b1", "a1", "origin-10", "origin-2", "Z", "a"}
	port := 20000
	for i := range sites {
		fmt.Fprintf(&c, "site %q {\n  hostname = \"s%d.example.com\"\n", []string{"www", "shop-b", "shop-a", "api", "Zed", "b-10", "b-2"}[i%7]+fmt.Sprintf("-%d", i), i)
		fmt.Fprintf(&c, "  health_check {\n    unhealthy_threshold = %d\n    healthy_threshold = 1\n", 1+i%2)
		if i%2 == 0 {
			c.WriteString("    ramp {\n      steps    = [10, 50, 100]\n      interval = \"1m\"\n    }\n")
		}
		c.WriteString("  }\n")
		for k := range 2 + i%3 {
			port++
			fmt.Fprintf(&c, "  origin %q {\n    address = \"http://127.0.0.1:%d\"\n    level = %d\n  }\n", origins[(i+k)%len(origins)], port, 1+k%(1+i%3))
		}
		c.WriteString("}\n")
	}
	return c.String()
}

// TestSiteGathererIsTheRegistrysPage: the per-site families SiteGatherer
// builds are, byte for byte in every format promhttp serves, the page a
// registry gathers from SiteCollector's const metrics (the way /metrics
// made them before), for every group and a prefix, over a fleet after
// rounds of mixed votes of several voters and sources, and over one large
// enough to fill several slabs.
func TestSiteGathererIsTheRegistrysPage(t *testing.T) {
	for _, fleet := range []struct {
		name     string
		sites    int
		voters   []string
		dupError bool
	}{
		{"mixed votes", 21, []string{"node-b", "node-a", "node-10"}, false},
		{"several slabs", 700, []string{"node-b", "node-a", "node-10"}, false},
		// The registry leaves out a series it has had, and says so; so does
		// the gatherer.
		{"a voter twice", 5, []string{"node-b", "node-a", "node-b"}, true},
	} {
		t.Run(fleet.name, func(t *testing.T) {
			sources := map[string]*scriptSource{
				"edge":   {name: "edge", voters: fleet.voters},
				"direct": {name: "direct", voters: []string{"direct"}},
			}
			st, err := store.Open(t.TempDir(), 0)
			if err != nil {
				t.Fatal(err)
			}
			e, diags := engine.New(context.Background(), enginetest.Config(t, scrapeConfig(fleet.sites)), engine.Options{Store: st,
				NewSource: func(c *config.Source, _ string, _ hclog.Logger) engine.VoteSource { return sources[c.Name] }})
			if diags.HasErrors() {
				st.Close()
				t.Fatal(diags.Error())
			}
			t.Cleanup(func() { e.Close(); st.Close() })
			for range 4 {
				e.RunRound(context.Background())
			}
			v := e.Views()
			for _, sel := range []struct {
				name  string
				sel   engine.SiteMetrics
				votes bool // whether it has per-vote series
			}{
				{"all", engine.AllSiteMetrics, true},
				{"site", engine.SiteMetrics{Sites: true}, false},
				{"origin", engine.SiteMetrics{Origins: true}, false},
				{"probe", engine.SiteMetrics{Probes: true}, true},
				{"prefix", engine.SiteMetrics{Prefix: "shop-", Sites: true, Origins: true, Probes: true}, true},
				{"no site", engine.SiteMetrics{Prefix: "nothing", Sites: true, Origins: true, Probes: true}, false},
			} {
				for _, format := range []expfmt.Format{
					expfmt.NewFormat(expfmt.TypeTextPlain),
					expfmt.NewFormat(expfmt.TypeOpenMetrics),
					expfmt.NewFormat(expfmt.TypeProtoDelim),
				} {
					t.Run(sel.name+"/"+string(format), func(t *testing.T) {
						reg := prometheus.NewRegistry()
						reg.MustRegister(v.SiteCollector(sel.sel))
						want, werr := encodePage(t, reg, format)
						got, gerr := encodePage(t, v.SiteGatherer(sel.sel), format)
						if (werr == nil) != (gerr == nil) || (fleet.dupError && sel.votes) != (gerr != nil) {
							t.Fatalf("registry's error %v, gatherer's %v", werr, gerr)
						}
						if gerr != nil && !strings.Contains(gerr.Error(), `voter="node-b"}: a voter voted more than once`) {
							t.Errorf("the gatherer's error does not name the series: %v", gerr)
						}
						if !bytes.Equal(got, want) {
							t.Fatalf("the gatherer's page (%d bytes) is not the registry's (%d bytes):\n%s", len(got), len(want), firstDiff(string(got), string(want)))
						}
						if sel.name == "all" && format == expfmt.NewFormat(expfmt.TypeTextPlain) {
							for _, w := range []string{"vigil_site_level_weight{", "vigil_origin_state{", "vigil_probe_success{", "vigil_probe_ssl_earliest_cert_expiry{", `state="unhealthy"} 1`} {
								if !bytes.Contains(got, []byte(w)) {
									t.Errorf("the fleet's page lacks %s: the test no longer covers it", w)
								}
							}
						}
					})
				}
			}
		})
	}
}

// encodePage gathers g and encodes its families in format.
func encodePage(t *testing.T, g prometheus.Gatherer, format expfmt.Format) ([]byte, error) {
	t.Helper()
	mfs, err := g.Gather()
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes(), err
}

// firstDiff shows where two pages part.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n got  %q\n want %q", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("one is a prefix of the other: %d lines and %d", len(g), len(w))
}

// TestSiteGathererConcurrentScrapes: scrapes at the same time (as two
// Prometheus servers make) build and encode their pages apart, sharing
// only what is never written (label names, help texts), so each gets the
// whole page (and -race sees no write to what they share).
func TestSiteGathererConcurrentScrapes(t *testing.T) {
	e, _ := enginetest.Start(t, enginetest.Config(t, scrapeConfig(30)), enginetest.Sources{}, "")
	e.RunRound(context.Background())
	v := e.Views()
	formats := []expfmt.Format{expfmt.NewFormat(expfmt.TypeProtoDelim), expfmt.NewFormat(expfmt.TypeTextPlain)}
	want := make([][]byte, len(formats))
	for k, f := range formats {
		want[k], _ = encodePage(t, v.SiteGatherer(engine.AllSiteMetrics), f)
	}
	var wg sync.WaitGroup
	pages := make([][]byte, 8)
	for i := range pages {
		wg.Go(func() {
			mfs, err := v.SiteGatherer(engine.AllSiteMetrics).Gather()
			if err != nil {
				t.Error(err)
				return
			}
			var b bytes.Buffer
			enc := expfmt.NewEncoder(&b, formats[i%2])
			for _, mf := range mfs {
				if err := enc.Encode(mf); err != nil {
					t.Error(err)
					return
				}
			}
			pages[i] = b.Bytes()
		})
	}
	wg.Wait()
	for i, p := range pages {
		if !bytes.Equal(p, want[i%2]) {
			t.Errorf("scrape %d (%s): %d bytes, alone %d", i, formats[i%2], len(p), len(want[i%2]))
		}
	}
}

// TestSiteGathererLeavesOutABadVoter: a voter name that is not UTF-8 (an
// in-process source can send one; gRPC cannot) gets no per-vote series
// and an error that names it, where a registry of const metrics would
// panic; the rest of the page is there.
func TestSiteGathererLeavesOutABadVoter(t *testing.T) {
	src := &scriptSource{name: "edge", voters: []string{"node-\xff", "node-a"}}
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	e, diags := engine.New(context.Background(), enginetest.Config(t, scrapeConfig(3)), engine.Options{Store: st,
		NewSource: func(c *config.Source, _ string, _ hclog.Logger) engine.VoteSource {
			if c.Name == "edge" {
				return src
			}
			return enginetest.NewSource(c.Name)
		}})
	if diags.HasErrors() {
		st.Close()
		t.Fatal(diags.Error())
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	e.RunRound(context.Background())
	mfs, err := e.Views().SiteGatherer(engine.AllSiteMetrics).Gather()
	if err == nil || !strings.Contains(err.Error(), `voter "node-\xff" is not UTF-8`) {
		t.Fatalf("error %v, want one naming the voter", err)
	}
	var page bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&page, mf); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(page.String(), "\xff") || !strings.Contains(page.String(), `voter="node-a"`) || !strings.Contains(page.String(), "vigil_site_level{") {
		t.Errorf("the page has the bad voter's series or lacks the others':\n%.2000s", page.String())
	}
}
