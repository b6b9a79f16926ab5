package main

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/simulate"
	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// TestEndToEndReplayLiveDataDir: a real agent at 500 ms rounds records a
// failover and a failback, and, while it still runs (it holds the state
// file), its data dir replays as its export does: the journal is read
// through the agent's API, so the recorded column has the switches
// (issue 33: it had none, and the verdict compared against nothing).
// Each is replayed under the recording's configuration and under a
// stricter threshold.
func TestEndToEndReplayLiveDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	a1 := demoorigin.New("a1")
	srvA := httptest.NewServer(a1)
	t.Cleanup(srvA.Close)
	srvB := httptest.NewServer(demoorigin.New("b1"))
	t.Cleanup(srvB.Close)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	write := func(name string, unhealthy int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(fmt.Sprintf(`
control {
  round_interval = "500ms"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "direct" { plugin = "vigil-source-direct" }
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
`, data, binDir, unhealthy, srvA.URL, srvB.URL)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	recording, stricter := write("vigil.hcl", 2), write("stricter.hcl", 3)
	agent := startAgentProc(t, recording)
	level := func() float64 { return agent.site(t, "www")["level"].(float64) }
	round := func() float64 { return agent.site(t, "www")["round"].(float64) }
	rounds := func(n int, what string) {
		r := round()
		waitFor(t, what, time.Duration(n)*time.Second, func() bool { return round() >= r+float64(n) })
	}
	waitFor(t, "level 1", 30*time.Second, func() bool { return level() == 1 })
	rounds(3, "three rounds on level 1")
	a1.SetMode(demoorigin.Failing)
	waitFor(t, "the failover", 30*time.Second, func() bool { return level() == 2 })
	// Four more rounds of a1 down (the stricter threshold's too): the
	// history keeps each round's milliseconds, so every 500 ms round
	// replays as its own.
	rounds(4, "four more rounds of a1 down (the stricter threshold's too)")
	a1.SetMode(demoorigin.Healthy)
	waitFor(t, "the failback", 30*time.Second, func() bool { return level() == 1 })
	rounds(2, "two rounds after the failback")

	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		cmd := exec.Command(filepath.Join(binDir, "vigil"), args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("vigil %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	byAPI := []string{"-address", agent.api, "-token", "e2e-token"}
	export := filepath.Join(dir, "incident.jsonl")
	said := run(append([]string{"history", "export", "-data-dir", data, "-o", export}, byAPI...)...)
	t.Log(said)
	if !strings.Contains(said, "journal: included") || !strings.Contains(said, "names from the running agent") {
		t.Fatalf("the export of a live data dir: %q; want the journal and the names through the agent", said)
	}
	// The stricter threshold fails over one recorded round later: by the
	// gap between the round of the recorded failover and the next, in
	// milliseconds as the history keeps them (the agent's rounds are
	// some milliseconds off 500 ms apart).
	later := stricterShift(t, export)
	t.Logf("the stricter threshold's failover is expected %s later", later)
	// switches is the replay's side-by-side table and verdict, without
	// its first line (which says where the names came from).
	switches := func(out string) string {
		i := strings.Index(out, "\nsite www\n")
		if i < 0 {
			t.Fatalf("no site in the replay:\n%s", out)
		}
		return out[i:]
	}
	for _, tc := range []struct {
		name, config, verdict string
	}{
		// The replayed failover comes in the same round as the recorded
		// one, or one round (some 500 ms) later: not "1 s later" as when
		// rounds of one second replayed as one.
		{"the recording's configuration", recording, "verdict: the same number of switches (2), failover at the same time"},
		{"a stricter threshold", stricter, "verdict: the same number of switches (2), failover " + later + " later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := run(append([]string{"simulate", "-config", tc.config, "-history", data}, byAPI...)...)
			fromExport := run("simulate", "-config", tc.config, "-history", export)
			t.Logf("live data dir:\n%s\nexport:\n%s", live, fromExport)
			if !strings.Contains(live, tc.verdict) {
				t.Errorf("the live data dir's replay: want %q", tc.verdict)
			}
			if strings.Contains(live, "the export has no journal") {
				t.Errorf("the live data dir's replay has no journal")
			}
			if a, b := switches(live), switches(fromExport); !strings.HasPrefix(a, b[:strings.Index(b, "verdict:")]) {
				t.Errorf("the live data dir and the export replay differently:\n%s\n---\n%s", a, b)
			}
		})
	}
	if level() != 1 {
		t.Errorf("the agent is on level %v after the replays, want 1: it kept running", level())
	}
}

// stricterShift reads the export at path and says how much later a
// failover one round after the recorded one comes: the gap from a1's
// round that holds the recorded failover to its next round, as the
// replay's verdict prints it.
func stricterShift(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x, err := simulate.ReadExport(f)
	if err != nil {
		t.Fatal(err)
	}
	if x.Header.Version < 4 {
		t.Fatalf("export version %d: no milliseconds", x.Header.Version)
	}
	var failover int64 = -1
	for _, e := range x.Events {
		if e.Event.Kind == decide.KindLevelSwitched && e.Event.Reason == decide.ReasonFailover {
			failover = e.Time.UnixMilli()
			break
		}
	}
	if failover < 0 {
		t.Fatal("the export's journal has no failover")
	}
	for _, o := range x.Origins {
		if o.Origin != "a1" {
			continue
		}
		for i, p := range o.Points {
			if i+1 < len(o.Points) && p.At() <= failover && o.Points[i+1].At() > failover {
				if i+2 >= len(o.Points) {
					t.Fatal("no round after the failover's")
				}
				d := time.Duration(o.Points[i+1].At()-p.At()) * time.Millisecond
				if d%time.Second == 0 {
					return fmt.Sprintf("%d s", int(d/time.Second))
				}
				return d.String()
			}
		}
	}
	t.Fatal("no round of a1 holds the recorded failover")
	return ""
}
