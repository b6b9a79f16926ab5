package agent_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMetricsOpenMetrics: asked for OpenMetrics, the agent's /metrics is
// a well-formed OpenMetrics page (every sample under the TYPE of its
// family, with a suffix that kind allows, one "# EOF" at the end) with every
// series name of the text format's page.
func TestMetricsOpenMetrics(t *testing.T) {
	f, addr := start(t)
	f.a.Engine().RunRound(context.Background())
	get := func(accept string) (string, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Get("Content-Type"), string(b)
	}
	// The agent may run a round of its own between the two scrapes: that
	// changes values, not which series there are.
	ctText, text := get("text/plain;version=0.0.4")
	ctOM, om := get("application/openmetrics-text;version=1.0.0")
	if !strings.HasPrefix(ctOM, "application/openmetrics-text") || !strings.HasPrefix(ctText, "text/plain") {
		t.Fatalf("content types %q and %q", ctOM, ctText)
	}
	if problems := checkOpenMetrics(om); len(problems) > 0 {
		t.Fatalf("not well-formed OpenMetrics:\n%s", strings.Join(problems, "\n"))
	}
	// Series only appear as the agent runs (a notifier's first event), so
	// every name of the text page, scraped first, is on the OpenMetrics
	// page too.
	inOM := map[string]bool{}
	for _, l := range samples(om) {
		inOM[sampleName(l)] = true
	}
	for _, l := range samples(text) {
		if !inOM[sampleName(l)] {
			t.Errorf("OpenMetrics page lacks %s of the text page", sampleName(l))
		}
	}
	for _, w := range []string{"vigil_site_level{", "vigil_origin_info{", "vigil_build_info{"} {
		if !strings.Contains(om, "\n"+w) {
			t.Errorf("OpenMetrics page lacks %s", w)
		}
	}
}

func samples(page string) []string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func sampleName(l string) string {
	name, _, _ := strings.Cut(l, "{")
	name, _, _ = strings.Cut(name, " ")
	return name
}

// checkOpenMetrics checks the structure OpenMetrics 1.0 asks of a page:
// each family's HELP and TYPE once and before its samples, each sample's
// name the family's with a suffix its type allows, and "# EOF" last.
func checkOpenMetrics(page string) (problems []string) {
	suffixes := map[string][]string{
		"counter":   {"_total", "_created"},
		"gauge":     {""},
		"unknown":   {""},
		"info":      {"_info"},
		"stateset":  {""},
		"histogram": {"_bucket", "_count", "_sum", "_created"},
		"summary":   {"", "_count", "_sum", "_created"},
	}
	if !strings.HasSuffix(page, "\n# EOF\n") {
		problems = append(problems, "does not end with # EOF")
	}
	lines := strings.Split(strings.TrimSuffix(page, "\n"), "\n")
	seen := map[string]bool{}
	family, kind := "", ""
	for i, l := range lines {
		switch {
		case l == "# EOF":
			if i != len(lines)-1 {
				problems = append(problems, "# EOF before the end")
			}
		case strings.HasPrefix(l, "# TYPE "):
			f := strings.Fields(l)
			if len(f) != 4 || suffixes[f[3]] == nil {
				problems = append(problems, "bad TYPE line: "+l)
				continue
			}
			// client_golang's Go collector has a gauge
			// go_memstats_alloc_bytes beside a counter
			// go_memstats_alloc_bytes_total, whose OpenMetrics family
			// names clash; Prometheus ingests both. That one is known
			// and allowed, no other.
			if seen[f[2]] && f[2] != "go_memstats_alloc_bytes" {
				problems = append(problems, "family twice: "+f[2])
			}
			seen[f[2]] = true
			family, kind = f[2], f[3]
		case strings.HasPrefix(l, "# HELP "), strings.HasPrefix(l, "# UNIT "):
		case strings.HasPrefix(l, "#"):
			problems = append(problems, "unknown comment: "+l)
		default:
			name := sampleName(l)
			ok := false
			for _, s := range suffixes[kind] {
				ok = ok || name == family+s
			}
			if !ok {
				problems = append(problems, "sample outside its family "+family+" ("+kind+"): "+l)
			}
		}
	}
	return problems
}
