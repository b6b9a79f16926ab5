package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

// TestStatusLargeFleet: a fleet larger than a screen gets its summary and
// the sites that need attention; -all and -json page through every site.
func TestStatusLargeFleet(t *testing.T) {
	const n = 1200 // more than two pages of vigil status's requests
	var b strings.Builder
	b.WriteString("control { sites_per_round = 5000 }\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "site \"s%04d\" {\n  hostname = \"s%04d.example.com\"\n  health_check {\n    unhealthy_threshold = 1\n    healthy_threshold = 1\n  }\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" {\n    address = \"http://127.0.0.1:2\"\n    level = 2\n  }\n}\n", i, i)
	}
	src := enginetest.Sources{}
	e, _ := enginetest.Start(t, enginetest.Config(t, b.String()), src, "")
	for _, s := range []string{"s0007", "s0500", "s1100"} {
		src["direct"].SetDown(s, "a", true)
	}
	e.RunRound(context.Background())
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e}))
	t.Cleanup(srv.Close)
	t.Setenv("VIGIL_ADDR", srv.URL)

	runIt := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(append([]string{"status"}, args...), &out, &errb); code != 0 {
			t.Fatalf("vigil status %v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	t.Run("summary and attention by default", func(t *testing.T) {
		out := runIt()
		if !strings.Contains(out, "1200 sites: 3 failed over, 1197 ok") {
			t.Fatalf("no fleet summary:\n%.500s", out)
		}
		if c := strings.Count(out, "failback auto"); c != 3 {
			t.Fatalf("%d cards, want the 3 that need attention:\n%.2000s", c, out)
		}
		if !strings.Contains(out, "3 of 1200 sites need attention; vigil status -all prints every site") {
			t.Fatalf("no hint about -all:\n%.500s", out[max(0, len(out)-500):])
		}
	})
	t.Run("all", func(t *testing.T) {
		if c := strings.Count(runIt("-all"), "failback auto"); c != n {
			t.Fatalf("-all printed %d cards, want %d", c, n)
		}
	})
	t.Run("prefix", func(t *testing.T) {
		if c := strings.Count(runIt("-prefix", "s11"), "failback auto"); c != 100 {
			t.Fatalf("-prefix s11 printed %d cards, want 100", c)
		}
	})
	t.Run("json", func(t *testing.T) {
		out := runIt("-json")
		var v struct {
			Total int               `json:"total"`
			Sites []json.RawMessage `json:"sites"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("-json is not JSON: %v\n%.300s", err, out)
		}
		if len(v.Sites) != n || v.Total != n {
			t.Fatalf("-json has %d sites (total %d), want %d", len(v.Sites), v.Total, n)
		}
	})
}

const faultyChain = `
source "faulty" { plugin = "vigil-source-faulty" }
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
site "api" {
  hostname = "api.example.com"
  origin "a" { address = "http://127.0.0.1:18004" }
  origin "b" { address = "http://127.0.0.1:18005" }
}
`

// TestStatusProblemsAndFailingSource: a vote source failing every round
// is named, with its error, by vigil status and vigil probe, and vigil
// status -problems exits as a Nagios check: 0 when all is well, 1 for a
// failing source, 2 for a site down, 3 when the agent cannot be asked.
func TestStatusProblemsAndFailingSource(t *testing.T) {
	ctx := context.Background()
	src := enginetest.Sources{}
	e, _ := enginetest.Start(t, enginetest.Config(t, faultyChain), src, "")
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e, Token: "t0ken"}))
	t.Cleanup(srv.Close)
	t.Setenv("VIGIL_ADDR", srv.URL)
	t.Setenv("VIGIL_TOKEN", "")
	vigil := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	type want struct {
		code     int
		contains []string
		lacks    []string
	}
	check := func(t *testing.T, w want, args ...string) string {
		t.Helper()
		code, out, errs := vigil(args...)
		if code != w.code {
			t.Fatalf("vigil %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, w.code, out, errs)
		}
		for _, s := range w.contains {
			if !strings.Contains(out, s) {
				t.Errorf("vigil %v: no %q in:\n%s", args, s, out)
			}
		}
		for _, s := range w.lacks {
			if strings.Contains(out, s) {
				t.Errorf("vigil %v: %q should not be in:\n%s", args, s, out)
			}
		}
		return out
	}

	e.RunRound(ctx)
	e.RunRound(ctx)
	t.Run("all well", func(t *testing.T) {
		check(t, want{code: 0, contains: []string{"OK: no site and no vote source needs attention"}, lacks: []string{"source faulty"}}, "status", "-problems")
		check(t, want{code: 0, lacks: []string{"source faulty", "OK:"}}, "status")
		check(t, want{code: 0, lacks: []string{"sources that failed"}}, "probe", "www", "-token", "t0ken")
	})

	const quota = `plugin error: quota exhausted (ResourceExhausted)`
	src["faulty"].SetError(fmt.Errorf("source %q: %s", "faulty", quota))
	e.RunRound(ctx)
	e.RunRound(ctx)
	t.Run("failing source", func(t *testing.T) {
		for _, args := range [][]string{{"status", "-problems"}, {"status", "-problem"}, {"status", "www", "-problems"}} {
			out := check(t, want{code: 1, contains: []string{"source faulty", "✕ failing: 2 rounds in a row", "2 of its last 4 rounds failed", quota, "WARNING: 1 vote source failing"}}, args...)
			// Nagios reads a check's status from its first line.
			if first, _, _ := strings.Cut(out, "\n"); !strings.HasPrefix(first, "WARNING: ") {
				t.Errorf("vigil %v: the first line is %q; want the check's WARNING line", args, first)
			}
		}
		check(t, want{code: 1}, "status", "-problems", "-json")
		check(t, want{code: 0, contains: []string{"source faulty", quota}, lacks: []string{"WARNING"}}, "status")
		out := check(t, want{code: 0, contains: []string{"sources that failed this round", "✕ faulty", quota, "settled by direct"}}, "probe", "www", "-token", "t0ken")
		if strings.Contains(out, "✕ direct") {
			t.Errorf("direct answered, yet is named as failed:\n%s", out)
		}
		_, js, _ := vigil("probe", "www", "-token", "t0ken", "-json")
		var res struct {
			Failed []struct{ Source, Error string } `json:"failed"`
		}
		if err := json.Unmarshal([]byte(js), &res); err != nil || len(res.Failed) != 1 || res.Failed[0].Source != "faulty" || !strings.Contains(res.Failed[0].Error, quota) {
			t.Errorf("probe -json failed = %+v (%v):\n%s", res.Failed, err, js)
		}
	})

	for _, o := range []string{"a1", "a2", "b1"} {
		src["direct"].SetDown("www", o, true)
	}
	for range 3 { // unhealthy_threshold
		e.RunRound(ctx)
	}
	t.Run("site down", func(t *testing.T) {
		check(t, want{code: 2, contains: []string{"www (www.example.com)", "CRITICAL: 1 site down, 1 vote source failing"}, lacks: []string{"api (api.example.com)"}}, "status", "-problems")
		check(t, want{code: 2}, "status", "-problems", "-json")
		// api is well, but the failing source concerns every site.
		check(t, want{code: 1, contains: []string{"WARNING: 1 vote source failing"}}, "status", "api", "-problems")
	})

	src["faulty"].SetError(nil)
	e.RunRound(ctx)
	t.Run("source answering again", func(t *testing.T) {
		check(t, want{code: 2, contains: []string{"source faulty", "● answering again", "5 of its last 8 rounds failed", "CRITICAL: 1 site down"}, lacks: []string{"vote source failing"}}, "status", "-problems")
	})

	t.Run("agent unreachable", func(t *testing.T) {
		dead := httptest.NewServer(nil)
		dead.Close()
		t.Setenv("VIGIL_ADDR", dead.URL)
		if code, _, errs := vigil("status", "-problems"); code != 3 || errs == "" {
			t.Errorf("status -problems against no agent: exit %d, stderr %q; want 3 and the error", code, errs)
		}
		if code, _, _ := vigil("status"); code != 1 {
			t.Errorf("status against no agent: exit %d, want 1", code)
		}
	})
}
