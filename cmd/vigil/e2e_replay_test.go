package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/simulate"
	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// TestEndToEndHistoryReplay records a real incident with the agent binary
// (a demo origin made to fail and recover), exports its history, and
// replays it under another unhealthy_threshold: the replayed failover comes
// exactly at the recorded round of a1's fifth down verdict in a row, the
// failback at the same round as recorded, and the same configuration
// replays to the recorded switches. The recorded votes (one direct vote an
// origin a round) replay through other chains: min_votes 2 settles
// nothing, so nothing switches; behind it a source that carries the votes
// (min_votes 1, tally carry) settles every round as recorded.
func TestEndToEndHistoryReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	a1 := demoorigin.New("a1")
	var a1Probes atomic.Int64 // requests a1 served: one a round (one source)
	srvA := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a1Probes.Add(1)
		a1.ServeHTTP(w, r)
	}))
	t.Cleanup(srvA.Close)
	srvB := httptest.NewServer(demoorigin.New("b1"))
	t.Cleanup(srvB.Close)

	dir := t.TempDir()
	const direct = `source "direct" { plugin = "vigil-source-direct" }`
	write := func(name string, unhealthy int, sources string) string {
		p := filepath.Join(dir, name)
		cfg := fmt.Sprintf(`
control {
  round_interval = "1s"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
%s
site "www" {
  hostname = "www.example.com"
  health_check {
    unhealthy_threshold = %d
    healthy_threshold   = 2
  }
  origin "a1" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), binDir, sources, unhealthy, srvA.URL, srvB.URL)
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	recording := write("vigil.hcl", 3, direct)
	other := write("other.hcl", 5, direct)
	twoVotes := write("two-votes.hcl", 3, `source "direct" {
  plugin    = "vigil-source-direct"
  min_votes = 2
}`)
	carried := write("carried.hcl", 3, `source "direct" {
  plugin    = "vigil-source-direct"
  min_votes = 2
}
source "carry" {
  plugin = "vigil-source-direct"
  tally  = "carry"
}`)

	agent := startAgentProc(t, recording)
	level := func() float64 { return agent.site(t, "www")["level"].(float64) }
	healthy := func() bool {
		o := agent.site(t, "www")["origins"].(map[string]any)
		return o["a1"].(map[string]any)["state"] == "healthy" && o["b1"].(map[string]any)["state"] == "healthy"
	}
	waitFor(t, "both origins healthy", 30*time.Second, healthy)
	round := func() float64 { return agent.site(t, "www")["round"].(float64) }
	// a round after the one running now has ended
	nextRound := func(what string) {
		r := round()
		waitFor(t, what, 10*time.Second, func() bool { return round() > r })
	}
	a1.SetMode(demoorigin.Failing)
	failing := a1Probes.Load() // every probe counted from here on fails
	waitFor(t, "the failover", 30*time.Second, func() bool { return level() == 2 })
	// Keep a1 down long enough for the stricter threshold too: six failed
	// probes, counted at a1, not seconds (a loaded machine runs fewer
	// rounds), and the round of the last one over.
	waitFor(t, "six failed probes of a1", 30*time.Second, func() bool { return a1Probes.Load() >= failing+6 })
	nextRound("the round of a1's sixth failed probe to end")
	a1.SetMode(demoorigin.Healthy)
	waitFor(t, "the failback", 30*time.Second, func() bool { return level() == 1 })
	nextRound("a round after the failback")
	nextRound("a second round after the failback")
	_ = agent.cmd.Process.Signal(syscall.SIGTERM)
	<-agent.done

	export := filepath.Join(dir, "incident.jsonl")
	run := func(args ...string) string {
		var out bytes.Buffer
		cmd := exec.Command(filepath.Join(binDir, "vigil"), args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("vigil %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	t.Log(run("history", "export", "-config", recording, "-o", export))
	f, err := os.Open(export)
	if err != nil {
		t.Fatal(err)
	}
	x, err := simulate.ReadExport(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if x.Header.Journal != "included" || !x.Header.Votes || x.Header.Version != simulate.ExportVersion {
		t.Fatalf("header %+v: want the journal and the votes", x.Header)
	}
	// What the rules say, from the recorded verdicts: the failover at the
	// round of a1's n-th down in a row, the failback at its 2nd up after.
	var points []simulate.ExportPoint
	for _, o := range x.Origins {
		if o.Origin == "a1" {
			points = o.Points
		}
	}
	nth := func(verdict string, n int, from int) (int64, int) {
		run := 0
		for i := from; i < len(points); i++ {
			if points[i].V == verdict {
				run++
				if run == n {
					return points[i].At(), i
				}
			} else if points[i].V != "none" {
				run = 0
			}
		}
		t.Fatalf("a1 has no %d %s verdicts in a row: %+v", n, verdict, points)
		return 0, 0
	}
	for _, p := range points {
		want := simulate.ExportTally{Src: "direct", Up: 1}
		if p.V == "down" {
			want = simulate.ExportTally{Src: "direct", Down: 1}
		}
		if p.V != "none" && (len(p.Votes) != 1 || p.Votes[0] != want) {
			t.Fatalf("a1's point %+v: want the votes %+v", p, want)
		}
	}
	fail3, _ := nth("down", 3, 0)
	fail5, i5 := nth("down", 5, 0)
	back, _ := nth("up", 2, i5)
	hhmmss := func(t int64) string { return time.UnixMilli(t).UTC().Format("15:04:05") }

	same := run("simulate", "-config", recording, "-history", export)
	t.Logf("the recording's own configuration:\n%s", same)
	want := fmt.Sprintf("  %-36s  %s\n", hhmmss(fail3)+" 1 -> 2 failover", hhmmss(fail3)+" 1 -> 2 failover")
	byVotes := "(votes: through this configuration's chain, min_votes, tally and the order replayed)"
	if !strings.Contains(same, want) || !strings.Contains(same, "verdict: the same number of switches (2), failover at the same time") || !strings.Contains(same, byVotes) {
		t.Fatalf("replaying the recording's configuration does not give the recorded switches; want the line %q", want)
	}

	replayed := run("simulate", "-config", other, "-history", export)
	t.Logf("unhealthy_threshold = 5:\n%s", replayed)
	wantFail := fmt.Sprintf("  %-36s  %s\n", hhmmss(fail3)+" 1 -> 2 failover", hhmmss(fail5)+" 1 -> 2 failover")
	wantBack := fmt.Sprintf("  %-36s  %s\n", hhmmss(back)+" 2 -> 1 failback", hhmmss(back)+" 2 -> 1 failback")
	// Times in milliseconds (history version 4): the shift is the recorded
	// rounds' own, as the verdict prints it.
	shift := time.Duration(fail5-fail3) * time.Millisecond
	later := fmt.Sprintf("failover %s later", shift)
	if shift%time.Second == 0 {
		later = fmt.Sprintf("failover %d s later", int(shift/time.Second))
	}
	if !strings.Contains(replayed, wantFail) || !strings.Contains(replayed, wantBack) || !strings.Contains(replayed, later) {
		t.Fatalf("replay under unhealthy_threshold = 5; want the lines %q and %q and %q", wantFail, wantBack, later)
	}

	// min_votes 2 over one vote a round: no verdict, no switch.
	none := run("simulate", "-config", twoVotes, "-history", export)
	t.Logf("min_votes = 2:\n%s", none)
	if !strings.Contains(none, "verdict: 2 fewer switches (0 instead of 2)") || !strings.Contains(none, byVotes) {
		t.Fatalf("replay under min_votes = 2: want no switch, replayed by votes")
	}
	// A source behind it that carries direct's vote settles as recorded:
	// it has no votes of its own (it is not in the recording).
	back3 := fmt.Sprintf("  %-36s  %s\n", hhmmss(back)+" 2 -> 1 failback", hhmmss(back)+" 2 -> 1 failback")
	carry := run("simulate", "-config", carried, "-history", export)
	t.Logf("min_votes = 2, then a carry source:\n%s", carry)
	if !strings.Contains(carry, want) || !strings.Contains(carry, back3) || !strings.Contains(carry, "verdict: the same number of switches (2), failover at the same time") ||
		!strings.Contains(carry, `source "carry" is not in the recording`) {
		t.Fatalf("replay with a carry source: want the recorded switches %q and %q", want, back3)
	}

	// The data_dir itself replays the same way.
	fromDir := run("simulate", "-config", other, "-history", filepath.Join(dir, "data"))
	if !strings.Contains(fromDir, wantFail) {
		t.Fatalf("replay from the data_dir:\n%s", fromDir)
	}
}
