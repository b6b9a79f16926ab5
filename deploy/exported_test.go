package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
	"github.com/vigilcdn/vigil/internal/testnet"
)

// conditional are series the rules may read that the end-to-end setup
// below does not produce, each with why; they must still be written by
// the code (a literal of core/ or plugins/) and documented.
var conditional = map[string]string{
	"vigil_cluster_owned_sites":            "only with a sharded etcd store",
	"vigil_node_edge_applies_total":        "only on a node that drives an edge (HAProxy, a template)",
	"vigil_probe_ssl_earliest_cert_expiry": "only for https origins (plugins/direct's TestProbeSeriesEndToEnd has one)",
}

// TestRulesAndDashboardReadExportedSeries runs a real agent (the node
// gateway and the direct probe as its chain, two levels of demo origins
// on loopback) and a real vigil-node attached to it and following its
// publication, scrapes both /metrics pages, and checks that every series
// the dashboard's queries read is on one of them, and every series the
// rules read is too (but for the few of conditional, written only in
// setups this test does not build, which must be in the code). Then a
// real Prometheus scrapes both with the example configuration and
// evaluates the rules on them.
func TestRulesAndDashboardReadExportedSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binaries")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/",
		"github.com/vigilcdn/vigil/cmd/vigil",
		"github.com/vigilcdn/vigil/plugins/direct/cmd/vigil-source-direct",
		"github.com/vigilcdn/vigil/plugins/node/cmd/vigil-source-node",
		"github.com/vigilcdn/vigil/plugins/node/cmd/vigil-node")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the binaries: %v\n%s", err, out)
	}

	origin := map[string]string{}
	for _, n := range []string{"a1", "a2", "b1"} {
		s := httptest.NewServer(demoorigin.New(n))
		t.Cleanup(s.Close)
		origin[n] = s.URL
	}
	dir := t.TempDir()
	apiAddr, gateway := testnet.Addr(t), testnet.Addr(t)
	cfg := fmt.Sprintf(`
control {
  round_interval = "500ms"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = %q
    token_env = "VIGIL_TOKEN"
  }
}
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 1
  timeout   = "3s"
  env       = ["VIGIL_NODE_TOKEN"]
  config {
    listen         = %q
    token_env      = "VIGIL_NODE_TOKEN"
    online_timeout = "3s"
  }
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = %q }
  origin "a2" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), bin, apiAddr, gateway, origin["a1"], origin["a2"], origin["b1"])
	config := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "VIGIL_TOKEN=deploy-test", "VIGIL_NODE_TOKEN=node-secret")
	start(t, "agent", env, filepath.Join(bin, "vigil"), "agent", "-config", config)
	nodeMetrics := testnet.Addr(t)
	start(t, "vigil-node", env, filepath.Join(bin, "vigil-node"), "-id", "edge-1",
		"-gateway", gateway, "-token-env", "VIGIL_NODE_TOKEN",
		"-control-plane", "http://"+apiAddr, "-proxy-listen", testnet.Addr(t),
		"-metrics-listen", nodeMetrics, "-state-dir", t.TempDir())

	// Wait (a hang guard only) for the pages to have what a running
	// fleet has: the node attached and following the publication, and
	// a round whose votes include the node's.
	var agent, node map[string]*dto.MetricFamily
	ready := func() bool {
		agent, node = scrape("http://"+apiAddr+"/metrics"), scrape("http://"+nodeMetrics+"/metrics")
		return value(agent, "vigil_votes_total", "source", "node", "outcome", "up") > 0 &&
			value(agent, "vigil_probe_success") > 0 &&
			value(node, "vigil_node_gateway_attached") == 1 &&
			value(node, "vigil_node_publication_version") >= 1 &&
			node["vigil_node_proxy_requests_total"] != nil
	}
	deadline := time.Now().Add(90 * time.Second)
	for !ready() {
		if time.Now().After(deadline) {
			t.Fatalf("the agent and the node never reached a running state; agent families %d, node families %d", len(agent), len(node))
		}
		time.Sleep(200 * time.Millisecond)
	}

	exported := map[string]bool{}
	for _, page := range []map[string]*dto.MetricFamily{agent, node} {
		for name, f := range page {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				exported[name+"_bucket"], exported[name+"_sum"], exported[name+"_count"] = true, true, true
			case dto.MetricType_SUMMARY:
				exported[name+"_sum"], exported[name+"_count"] = true, true
			default:
				exported[name] = true
			}
		}
	}
	recorded := recordedNames(readRules(t))

	for _, q := range dashboardQueries(t) {
		for _, n := range seriesNames(q.expr) {
			if !exported[n] {
				t.Errorf("%s reads %s, which neither the agent nor vigil-node exports", q.where, n)
			}
		}
	}
	code := sourceText(t)
	for _, r := range readRules(t) {
		for _, n := range seriesNames(r.expr) {
			switch {
			case exported[n] || recorded[n] || n == "up":
			case conditional[n] != "":
				if !strings.Contains(code, `"`+n+`"`) {
					t.Errorf("%s reads %s (%s), which the code never writes", r.name(), n, conditional[n])
				}
			default:
				t.Errorf("%s reads %s, which neither the agent nor vigil-node exports", r.name(), n)
			}
		}
	}
	for n := range conditional {
		if exported[n] {
			t.Logf("%s is exported here after all: it need not be in conditional", n)
		}
	}

	t.Run("a real Prometheus evaluates the rules", func(t *testing.T) {
		need(t, "prometheus")
		prometheusEvaluates(t, apiAddr, nodeMetrics)
	})
}

// prometheusEvaluates runs a real Prometheus with the example
// configuration (its targets pointed at the running agent and node,
// scraping and evaluating every second) and the shipped rules, and waits
// (a hang guard only) until every rule group has evaluated without error
// and the recording rules give the values the running fleet implies,
// with the host label of the example's relabelling.
func prometheusEvaluates(t *testing.T, agentAddr, nodeAddr string) {
	example, err := os.ReadFile(prometheusFile)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer(
		"scrape_interval: 30s", "scrape_interval: 1s",
		"evaluation_interval: 30s", "evaluation_interval: 1s",
		"- vigil.rules.yml", "- "+rules,
		"127.0.0.1:8470", agentAddr,
		"127.0.0.1:9471", nodeAddr,
		`targets: ["127.0.0.1:9093"]`, `targets: []`,
	).Replace(string(example))
	if cfg == string(example) || !strings.Contains(cfg, agentAddr) || !strings.Contains(cfg, nodeAddr) {
		t.Fatalf("the example's layout changed: cannot point it at the test's targets:\n%s", cfg)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testnet.Addr(t)
	start(t, "prometheus", os.Environ(), "prometheus", "--config.file="+path,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	base := "http://" + addr

	get := func(path string, v any) bool {
		resp, err := http.Get(base + path)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(v) == nil
	}
	// Every group has run, and no rule has an evaluation error.
	var groups struct {
		Data struct {
			Groups []struct {
				Name           string  `json:"name"`
				EvaluationTime float64 `json:"evaluationTime"`
				LastEvaluation string  `json:"lastEvaluation"`
				Rules          []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		ran := get("/api/v1/rules", &groups) && len(groups.Data.Groups) >= 4
		for _, g := range groups.Data.Groups {
			for _, r := range g.Rules {
				ran = ran && r.Health != "unknown"
			}
		}
		if ran {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus did not evaluate every rule: %+v", groups.Data.Groups)
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, g := range groups.Data.Groups {
		for _, r := range g.Rules {
			if r.Health != "ok" {
				t.Errorf("rule %s (group %s): health %s, %s", r.Name, g.Name, r.Health, r.LastError)
			}
		}
	}
	// What the running fleet implies: one site on its top level, three
	// healthy origins, rounds every 500ms each probing the one site.
	for _, tc := range []struct {
		query string
		ok    func(float64) bool
		want  string
	}{
		{`vigil:sites_off_top_level:sum{job="vigil"}`, func(v float64) bool { return v == 0 }, "0"},
		{`vigil:origins_unhealthy:sum{job="vigil"}`, func(v float64) bool { return v == 0 }, "0"},
		{`vigil:round_interval_seconds:avg10m{job="vigil"}`, func(v float64) bool { return v > 0 }, "above 0"},
		{`vigil:site_probe_interval_seconds:avg10m{job="vigil"}`, func(v float64) bool { return v > 0 }, "above 0"},
		{`vigil:detection_seconds:estimate{job="vigil"}`, func(v float64) bool { return v > 0 }, "above 0"},
		{`vigil:source_failure_ratio:rate10m{job="vigil",source="node"}`, func(v float64) bool { return v == 0 }, "0"}, // direct, after it, is never asked: 0/0
		{`vigil_node_gateway_attached{job="vigil-node"}`, func(v float64) bool { return v == 1 }, "1"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			var res struct {
				Data struct {
					Result []struct {
						Metric map[string]string `json:"metric"`
						Value  [2]any            `json:"value"`
					} `json:"result"`
				} `json:"data"`
			}
			deadline := time.Now().Add(60 * time.Second)
			var v float64
			for {
				if get("/api/v1/query?query="+url.QueryEscape(tc.query), &res) && len(res.Data.Result) == 1 {
					s, _ := res.Data.Result[0].Value[1].(string)
					if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) {
						v = f
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("no value for %s: %+v", tc.query, res.Data.Result)
				}
				time.Sleep(250 * time.Millisecond)
			}
			if !tc.ok(v) {
				t.Errorf("%s = %v, want %s", tc.query, v, tc.want)
			}
			if m := res.Data.Result[0].Metric; m["host"] != "127.0.0.1" || m["vigil"] != "vigil" || m["instance"] == "" {
				t.Errorf("%s has labels %v, want instance, host=\"127.0.0.1\" and vigil=\"vigil\" (the example's target labels)", tc.query, m)
			}
		})
	}
}

// start runs a binary with args until the test ends; its output is shown
// if the test fails.
func start(t *testing.T, name string, env []string, bin string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
}

// scrape reads a /metrics page, nil while it cannot be read.
func scrape(url string) map[string]*dto.MetricFamily {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil
	}
	return fams
}

// value is the sum of family name's samples whose labels include the
// given name/value pairs; 0 when there are none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	sum := 0.0
	for _, m := range f.GetMetric() {
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		switch {
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

// sourceText is the Go source of core/ and plugins/ (tests left out), for
// the series this test cannot see written.
func sourceText(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, root := range []string{"../core", "../plugins"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			b.Write(src)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
