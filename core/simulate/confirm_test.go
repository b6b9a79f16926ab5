package simulate_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/simulate"
)

var updateConfirm = flag.Bool("update-confirm", false, "rewrite testdata/confirm/*/expected.jsonl from the current rules")

// TestConfirmScenarios runs the fast-confirmation scenarios of
// docs/decisions.md (testdata/confirm): a failover in one round and two
// confirmations, a recovery confirmed fast, a flapping verdict, a budget
// exhausted by an incident, and the passive trigger.
func TestConfirmScenarios(t *testing.T) {
	dir := filepath.Join("testdata", "confirm")
	if *updateConfirm {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() {
				sc := filepath.Join(dir, e.Name())
				if err := os.WriteFile(filepath.Join(sc, "expected.jsonl"), simulateBytes(t, sc, false), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	runScenarios(t, dir)
}

// TestConfirmIntervalAloneChangesNothing: confirm_interval on every site
// of the shared conformance scenarios and the project's base scenarios,
// with no confirmation tick in their timelines, prints byte for byte what
// they print without it (the golden output of the release before the
// anti-flap rules): a confirmation happens only at a tick.
func TestConfirmIntervalAloneChangesNothing(t *testing.T) {
	var dirs [][2]string
	for _, base := range [][2]string{{"conformance-", conformanceDir()}, {"scenarios-", filepath.Join("testdata", "scenarios")}} {
		entries, err := os.ReadDir(base[1])
		if err != nil {
			t.Logf("skipping %s: %v", base[1], err)
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, [2]string{base[0] + e.Name(), filepath.Join(base[1], e.Name())})
			}
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no scenario found")
	}
	for _, d := range dirs {
		t.Run(d[0], func(t *testing.T) {
			cfg, diags := config.Load(filepath.Join(d[1], "config.hcl"))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			for _, s := range cfg.Sites {
				hc := *s.HealthCheck
				hc.ConfirmInterval = cfg.Control.RoundInterval / 10
				s.HealthCheck = &hc
			}
			tl, err := os.Open(filepath.Join(d[1], "timeline.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tl.Close() })
			steps, err := simulate.ParseTimeline(tl, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := simulate.RunFleet(fleet.NewRoundClock(cfg), steps, &out); err != nil {
				t.Fatal(err)
			}
			golden, err := os.ReadFile(filepath.Join("testdata", "antiflap-golden", d[0]+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), golden) {
				t.Errorf("confirm_interval set changed the output\n got: %s\nwant: %s", out.Bytes(), golden)
			}
		})
	}
}

// TestConfirmLineErrors: a bad confirmation line is refused with its line
// number and what to write instead.
func TestConfirmLineErrors(t *testing.T) {
	cfg, diags := config.Load(filepath.Join("testdata", "confirm", "suspect-trigger", "config.hcl"))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, tt := range []struct{ name, line, want string }{
		{"suspect alone", `{"suspect": ["www"]}`, `"suspect" goes with a confirmation tick`},
		{"unknown suspect", `{"confirm": {}, "suspect": ["nosuch"]}`, "suspect: there is no site named nosuch"},
		{"suspect not a list", `{"confirm": {}, "suspect": "www"}`, "suspect must be a list of site names"},
		{"another key", `{"confirm": {}, "round": {}}`, `holds "confirm" and, optionally, "suspect"; not "round"`},
		{"bad votes", `{"confirm": {"www/zz": {"direct": ["down"]}}}`, "confirm: round key \"www/zz\": site www has no origin zz"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := simulate.ParseTimeline(strings.NewReader("{\"round\": {}}\n"+tt.line+"\n"), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "timeline line 2") {
				t.Fatalf("error %v; want %q at line 2", err, tt.want)
			}
		})
	}
	steps, err := simulate.ParseTimeline(strings.NewReader(`{"confirm": {"www/a1": {"direct": ["down"]}}, "suspect": ["www", "api"]}`), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st := steps[0]; !st.Confirm || len(st.Suspect) != 2 || len(st.Round["www/a1"]["direct"]) != 1 {
		t.Fatalf("step %+v", st)
	}
}
