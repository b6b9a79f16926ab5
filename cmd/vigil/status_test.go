package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/api"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
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
	srv := httptest.NewServer(api.New(api.Options{Engine: e}))
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
