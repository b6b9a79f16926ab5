package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

// TestStatusSummaryGivesTheCycle: the summary of a fleet larger than a
// screen says how often each site is probed, ceil(probable sites /
// sites_per_round) rounds of round_interval, from the API's summary:
// sites whose health check is off do not count.
func TestStatusSummaryGivesTheCycle(t *testing.T) {
	tests := []struct {
		name    string
		control string
		want    string
	}{
		{"more sites than sites_per_round", `round_interval = "30s"` + "\n  sites_per_round = 4", "; each site probed every 3m30s"},
		{"every site each round", `round_interval = "20s"` + "\n  sites_per_round = 500", "; each site probed every 20s"},
		{"auto: the last round's size", `round_interval = "20s"` + "\n  sites_per_round = \"auto\"", "; each site probed every 20s (sites_per_round auto: 25 sites last round)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			fmt.Fprintf(&b, "control {\n  %s\n}\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n", tt.control)
			for i := range 30 { // 25 probed, 5 paused
				check := ""
				if i >= 25 {
					check = "  health_check { enabled = false }\n"
				}
				fmt.Fprintf(&b, "site \"s%02d\" {\n  hostname = \"s%02d.example.com\"\n%s  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" { address = \"http://127.0.0.1:2\" }\n}\n", i, i, check)
			}
			e, _ := enginetest.Start(t, enginetest.Config(t, b.String()), enginetest.Sources{}, "")
			e.RunRound(context.Background())
			srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e}))
			t.Cleanup(srv.Close)
			t.Setenv("VIGIL_ADDR", srv.URL)
			var out, errb bytes.Buffer
			if code := run([]string{"status"}, &out, &errb); code != 0 {
				t.Fatalf("vigil status: exit %d: %s", code, errb.String())
			}
			line := ""
			for l := range strings.SplitSeq(out.String(), "\n") {
				if strings.Contains(l, "waiting for a manual failback") {
					line = l
				}
			}
			if !strings.HasSuffix(line, tt.want) {
				t.Fatalf("summary line %q does not end in %q:\n%.800s", line, tt.want, out.String())
			}
		})
	}
}
