package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

const (
	rulesFile        = "prometheus/vigil.rules.yml"
	rulesTestFile    = "prometheus/vigil.rules.test.yml"
	prometheusFile   = "prometheus/prometheus.yml"
	dashboardFile    = "grafana/vigil.json"
	alertmanagerFile = "alertmanager/alertmanager.yml"
	runbookBase      = "https://github.com/vigilcdn/vigil/blob/main/docs/runbooks.md#"
)

// TestPrometheusRules checks the shipped rules with promtool (check rules,
// and the cases of vigil.rules.test.yml), the example configuration that
// loads them, and that every alert has a severity and a runbook_url that
// leads to its own section of docs/runbooks.md.
func TestPrometheusRules(t *testing.T) {
	need(t, "promtool")
	runOK(t, ".", "promtool", "check", "rules", rulesFile)
	runOK(t, "prometheus", "promtool", "test", "rules", filepath.Base(rulesTestFile))
	runOK(t, "prometheus", "promtool", "check", "config", filepath.Base(prometheusFile))

	rules := readRules(t)
	anchors := runbookAnchors(t)
	alerts := 0
	for _, r := range rules {
		if r.alert == "" {
			continue
		}
		alerts++
		t.Run(r.alert, func(t *testing.T) {
			if !slices.Contains([]string{"critical", "warning", "info"}, r.severity) {
				t.Errorf("severity %q, want critical, warning or info (as the agent's own alerts)", r.severity)
			}
			want := runbookBase + strings.ToLower(r.alert)
			if r.runbook != want {
				t.Errorf("runbook_url %q, want %q", r.runbook, want)
			}
			if !anchors[strings.ToLower(r.alert)] {
				t.Errorf("docs/runbooks.md has no section %q for it", r.alert)
			}
		})
	}
	// What the brief of the rules promises, by name.
	for _, name := range []string{"VigilSourceFailing", "VigilConfigReloadRefused", "VigilNodeOffline",
		"VigilOriginCertificateFailing", "VigilSitesProbedTooRarely", "VigilRoundsLate", "VigilStateNotSavedMetric"} {
		if !slices.ContainsFunc(rules, func(r rule) bool { return r.alert == name }) {
			t.Errorf("the rules have no alert %s", name)
		}
	}
	if alerts < 10 {
		t.Errorf("read %d alerts from %s: the file's layout changed?", alerts, rulesFile)
	}
}

// TestRulesAndDashboardNameDocumentedSeries: every series the rules and
// the dashboard read is one docs/metrics.md documents, or one the rules
// record. (The end-to-end test checks them against real /metrics pages.)
func TestRulesAndDashboardNameDocumentedSeries(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	recorded := recordedNames(readRules(t))
	check := func(where, expr string) {
		names := seriesNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q names no series", where, expr)
		}
		for _, n := range names {
			if recorded[n] || n == "up" {
				continue
			}
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
			if !strings.Contains(string(doc), "`"+n+"`") && !strings.Contains(string(doc), "`"+base+"`") {
				t.Errorf("%s uses %s, which docs/metrics.md does not document", where, n)
			}
		}
	}
	for _, r := range readRules(t) {
		check(r.name(), r.expr)
	}
	for _, q := range dashboardQueries(t) {
		check(q.where, q.expr)
	}
	for name := range recorded {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("the rules record %s, which docs/metrics.md does not list", name)
		}
	}
}

// TestDashboard: the dashboard is a Grafana dashboard with the rows the
// project promises, every panel has a query, and every query (templating
// and annotations included) is valid PromQL by promtool's own parser.
func TestDashboard(t *testing.T) {
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("the dashboard has no title or uid")
	}
	var rows []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			rows = append(rows, p.Title)
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if strings.TrimSpace(q.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
		}
	}
	for _, want := range []string{"Fleet", "Levels", "Switches", "Rounds and probe latency", "Sources", "Nodes"} {
		if !slices.Contains(rows, want) {
			t.Errorf("the dashboard has no row %q (rows: %v)", want, rows)
		}
	}

	need(t, "promtool")
	// Each query as a recording rule, Grafana's variables given values,
	// so that promtool parses it.
	var f strings.Builder
	f.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range dashboardQueries(t) {
		expr := q.expr
		if m := labelValues.FindStringSubmatch(expr); m != nil {
			expr = m[1]
		}
		expr = grafanaVars.Replace(expr)
		j, _ := json.Marshal(expr)
		fmt.Fprintf(&f, "      - record: dashboard:query%d\n        expr: %s\n", i, j)
	}
	path := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(path, []byte(f.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runOK(t, ".", "promtool", "check", "rules", path)
}

// TestAlertmanagerExample checks the example with amtool, and where its
// routes send each kind of alert.
func TestAlertmanagerExample(t *testing.T) {
	need(t, "amtool")
	runOK(t, ".", "amtool", "check-config", alertmanagerFile)
	for _, tc := range []struct {
		labels   []string
		receiver string
	}{
		{[]string{"alertname=VigilStateNotSaved", "severity=critical", "reason=disk_full"}, "machine-pager"},
		{[]string{"alertname=VigilStoreOnReserve", "severity=warning"}, "machine-tickets"},
		{[]string{"alertname=VigilDown", "severity=critical"}, "machine-pager"},
		{[]string{"alertname=VigilNodeOffline", "severity=warning"}, "edge-chat"},
		{[]string{"alertname=VigilAllLevelsUnhealthy", "severity=critical", "site=www"}, "cdn-pager"},
		{[]string{"alertname=VigilOriginUnhealthy", "severity=warning", "site=www"}, "cdn-chat"},
		{[]string{"alertname=VigilOriginCertificateFailing", "severity=critical", "site=www"}, "cdn-pager"},
		{[]string{"alertname=VigilSourceFailing", "severity=warning"}, "cdn-tickets"},
	} {
		t.Run(tc.labels[0], func(t *testing.T) {
			args := append([]string{"config", "routes", "test", "--config.file=" + alertmanagerFile, "--verify.receivers=" + tc.receiver}, tc.labels...)
			out, err := exec.Command("amtool", args...).CombinedOutput()
			if err != nil {
				t.Errorf("amtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		})
	}
}

// TestSeriesNames: what the query reader takes for a series name.
func TestSeriesNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`vigil_site_level > 1`, []string{"vigil_site_level"}},
		{`sum by (reason) (increase(vigil_level_switches_total{instance=~"$instance"}[$__rate_interval]))`, []string{"vigil_level_switches_total"}},
		{`vigil_origin_consecutive_failures / on (instance, site) group_left vigil_site_unhealthy_threshold`, []string{"vigil_origin_consecutive_failures", "vigil_site_unhealthy_threshold"}},
		{`count_values("level", vigil_site_level{site="a{b}"}) or vector(0)`, []string{"vigil_site_level"}},
		{`histogram_quantile(0.99, sum by (le) (rate(vigil_round_duration_seconds_bucket[5m])))`, []string{"vigil_round_duration_seconds_bucket"}},
		{`avg_over_time((vigil_site_level > bool 1)[1h:1m]) * 1e3`, []string{"vigil_site_level"}},
		{`label_values(vigil_build_info, instance)`, []string{"vigil_build_info"}},
		{`label_values(vigil_site_level{instance=~"$instance"}, site)`, []string{"vigil_site_level"}},
		{`max without (voter) (vigil_probe_reason{reason="tls_failed"}) unless ignoring(x) vigil:a:b offset 5m`, []string{"vigil_probe_reason", "vigil:a:b"}},
		{`1 / sum by (job, instance) (rate(vigil_rounds_total[10m]))`, []string{"vigil_rounds_total"}},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			if got := seriesNames(tc.expr); !slices.Equal(got, tc.want) {
				t.Errorf("seriesNames = %q, want %q", got, tc.want)
			}
		})
	}
}

// rule is one rule of vigil.rules.yml as far as the tests need it.
type rule struct {
	alert, record     string
	expr              string
	severity, runbook string
}

func (r rule) name() string {
	if r.alert != "" {
		return "alert " + r.alert
	}
	return "record " + r.record
}

// readRules reads the rules of vigil.rules.yml with a reader of its own
// small layout (one "- alert:" or "- record:" item a rule, expr on one
// line or as a "|" block), not a YAML library: promtool checks the YAML.
func readRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []rule
	var cur *rule
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "#") {
			continue
		}
		key, val, _ := strings.Cut(strings.TrimPrefix(l, "- "), ":")
		val = strings.Trim(strings.TrimSpace(val), `"`)
		switch {
		case strings.HasPrefix(l, "- alert:") || strings.HasPrefix(l, "- record:"):
			out = append(out, rule{})
			cur = &out[len(out)-1]
			if key == "alert" {
				cur.alert = val
			} else {
				cur.record = val
			}
		case cur == nil:
		case key == "expr" && val == "|":
			indent := len(lines[i+1]) - len(strings.TrimLeft(lines[i+1], " "))
			var block []string
			for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" && len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) >= indent {
				i++
				block = append(block, strings.TrimSpace(lines[i]))
			}
			cur.expr = strings.Join(block, " ")
		case key == "expr":
			cur.expr = val
		case key == "labels":
			if m := regexp.MustCompile(`severity: *(\w+)`).FindStringSubmatch(val); m != nil {
				cur.severity = m[1]
			}
		case key == "severity":
			cur.severity = val
		case key == "runbook_url":
			cur.runbook = strings.TrimPrefix(l, "runbook_url:")
			cur.runbook = strings.Trim(strings.TrimSpace(cur.runbook), `"`)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no rules read from %s", rulesFile)
	}
	for _, r := range out {
		if r.expr == "" {
			t.Fatalf("%s: no expr read", r.name())
		}
	}
	return out
}

// recordedNames are the series the rules record.
func recordedNames(rules []rule) map[string]bool {
	m := map[string]bool{}
	for _, r := range rules {
		if r.record != "" {
			m[r.record] = true
		}
	}
	return m
}

// query is one PromQL query of the dashboard and where it is.
type query struct{ where, expr string }

// dashboardQueries are every query of the dashboard: the panels' targets,
// the template variables' and the annotations'.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []query
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			out = append(out, query{"panel " + p.Title, q.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		out = append(out, query{"variable " + v.Name, q.Query})
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			out = append(out, query{"annotation " + a.Name, a.Expr})
		}
	}
	if len(out) < 20 {
		t.Fatalf("read %d queries from %s: the file's layout changed?", len(out), dashboardFile)
	}
	return out
}

var (
	// labelValues is Grafana's variable query label_values(SELECTOR, LABEL).
	labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_]\w*\s*\)\s*$`)
	grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$instance", ".*", "$node", ".*", "$site", ".*")

	stringLit = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	matchers  = regexp.MustCompile(`\{[^}]*\}`)
	ranges    = regexp.MustCompile(`\[[^\]]*\]`)
	grouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	ident     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	keywords  = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless", "inf", "nan", "atan2"}
)

// seriesNames are the metric names a PromQL query reads, in order, each
// once. It is a careful tokenizer rather than the PromQL parser (which
// would bring github.com/prometheus/prometheus into go.mod): strings,
// label matchers, ranges and grouping lists are taken out first, then an
// identifier is a series unless a "(" follows it (a function or an
// aggregation), it is a keyword, or it is part of a number (1e3).
// TestDashboard has promtool parse every query as well.
func seriesNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	e := stringLit.ReplaceAllString(expr, `""`)
	e = matchers.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range ident.FindAllStringIndex(e, -1) {
		name := e[loc[0]:loc[1]]
		if loc[0] > 0 && (unicode.IsDigit(rune(e[loc[0]-1])) || e[loc[0]-1] == '.') {
			continue // the exponent of a number, as 1e3
		}
		if rest := strings.TrimLeft(e[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue
		}
		if slices.Contains(keywords, strings.ToLower(name)) || slices.Contains(out, name) {
			continue
		}
		out = append(out, name)
	}
	return out
}

// runbookAnchors are the anchors of docs/runbooks.md's headings (GitHub's
// rule: lower case, spaces to hyphens, other punctuation dropped).
func runbookAnchors(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	inFence := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(l, "#") {
			continue
		}
		var s strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#"))) {
			switch {
			case r == ' ':
				s.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				s.WriteRune(r)
			}
		}
		m[s.String()] = true
	}
	return m
}
