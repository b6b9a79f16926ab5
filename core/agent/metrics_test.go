package agent_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMetricsAreCompleteAndValid: the agent's /metrics has every counter
// at 0 before its first event, the build's info, the per-origin counters
// and the last round's per-vote series, and passes promtool check metrics.
func TestMetricsAreCompleteAndValid(t *testing.T) {
	f, addr := start(t)
	ctx := context.Background()
	f.a.Engine().RunRound(ctx)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`vigil_level_switches_total{reason="failover"} 0`,
		`vigil_level_switches_total{reason="failback"} 0`,
		`vigil_events_total{kind="all_levels_unhealthy"} 0`,
		`vigil_votes_total{outcome="down",source="direct"} 0`,
		`vigil_verdicts_total{source="direct",verdict="down"} 0`,
		`vigil_build_info{commit="unknown",goversion="go`,
		`vigil_origin_consecutive_successes{origin="a1",site="www"} `, // 1 or 2: the agent may have run a round of its own
		`vigil_origin_consecutive_failures{origin="a1",site="www"} 0`,
		`vigil_site_unhealthy_threshold{site="www"} 3`,
		`vigil_probe_success{origin="a1",site="www",source="direct",voter="direct"} 1`,
		`vigil_probe_duration_seconds{origin="a1",site="www",source="direct",voter="direct"} `,
		`vigil_probe_reason{origin="a1",reason="ok",site="www",source="direct",voter="direct"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s\n%s", want, grepLines(text, "vigil_origin_consecutive"))
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not installed (Debian's prometheus package; make deps installs it)")
		}
		t.Skip("promtool not installed (make deps installs Debian's prometheus)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
