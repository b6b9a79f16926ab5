package simulate_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/simulate"
	"github.com/vigilcdn/vigil/core/store"
)

// TestReplayVerdictComparesAutomaticSwitches: the recording's operator
// switches are listed but not counted (a replay makes none), and the
// failback notices and flap holds of the journal and of the replay are
// listed and compared (issue 33, a replay that tells the truth).
func TestReplayVerdictComparesAutomaticSwitches(t *testing.T) {
	x := incident()
	pa := x.Origins[0].Points
	// An operator pinned the site to level 2 at the failover's next
	// round, then the rules' failback never came: a manual switch back.
	x.Events = []store.Event{
		{Site: "www", Time: timeAt(pa[4].T + 1), Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 1, ToLevel: 2, Reason: decide.ReasonFailover}},
		{Site: "www", Time: timeAt(pa[5].T + 1), Actor: "ops", Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 2, ToLevel: 2, Reason: decide.ReasonManual}},
		{Site: "www", Time: timeAt(pa[7].T + 1), Event: decide.Event{Kind: decide.KindFailbackAvailable, Level: 1}},
		{Site: "www", Time: timeAt(pa[8].T + 1), Actor: "ops", Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 2, ToLevel: 1, Reason: decide.ReasonManual}},
	}
	for _, tc := range []struct {
		name, hc string
		verdict  string
		notices  string
		lines    []string
	}{
		{"auto failback against a recorded manual one", "unhealthy_threshold = 3\nhealthy_threshold = 2",
			"1 more switch (2 instead of 1), failover at the same time; 2 recorded operator switches not counted (a replay makes none)",
			"failback notices 1 recorded, 0 replayed; flap holds 0 recorded, 0 replayed",
			[]string{" 2 -> 2 manual (operator)", "level 1 failback notice"}},
		{"manual failback replayed", "manual",
			"the same number of switches (1), failover at the same time; 2 recorded operator switches not counted (a replay makes none)",
			"failback notices 1 recorded, 1 replayed; flap holds 0 recorded, 0 replayed", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg *config.Config
			if tc.hc == "manual" {
				cfg = manualConfig(t)
			} else {
				cfg = replayConfig(t, tc.hc)
			}
			res, err := simulate.Replay(x, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Summary(); got != tc.verdict {
				t.Errorf("verdict %q\nwant    %q", got, tc.verdict)
			}
			var buf bytes.Buffer
			res.WriteText(&buf)
			out := buf.String()
			if !strings.Contains(out, "\nnotices: "+tc.notices+"\n") {
				t.Errorf("output:\n%s\nwant the line notices: %s", out, tc.notices)
			}
			for _, l := range tc.lines {
				if !strings.Contains(out, l) {
					t.Errorf("output:\n%s\nwant %q in it", out, l)
				}
			}
		})
	}
}

// manualConfig is replayConfig's site with failback = "manual".
func manualConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, diags := config.Parse("m.hcl", []byte(`
control { round_interval = "10s" }
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  failback = "manual"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = "http://127.0.0.1:2"
    level   = 2
  }
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return cfg
}
