package simulate_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/simulate"
)

var updateAntiFlap = flag.Bool("update-antiflap", false, "rewrite testdata/antiflap/*/expected.jsonl from the current rules")

// TestAntiFlapScenarios runs the anti-flap scenarios of docs/antiflap.md
// (testdata/antiflap), one or more per rule.
func TestAntiFlapScenarios(t *testing.T) {
	dir := filepath.Join("testdata", "antiflap")
	if *updateAntiFlap {
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

// simulateBytes is the output of a scenario, through simulate's round
// clock or (wall) through a fleet that counts wall-clock time.
func simulateBytes(t *testing.T, dir string, wall bool) []byte {
	t.Helper()
	cfg, diags := config.Load(filepath.Join(dir, "config.hcl"))
	if diags.HasErrors() {
		t.Fatalf("config: %s", diags.Error())
	}
	tl, err := os.Open(filepath.Join(dir, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	steps, err := simulate.ParseTimeline(tl, cfg)
	if err != nil {
		t.Fatalf("timeline: %v", err)
	}
	f := fleet.NewRoundClock(cfg)
	if wall {
		f = fleet.New(cfg)
	}
	var out bytes.Buffer
	if err := simulate.RunFleet(f, steps, &out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestWithoutAntiFlapOutputIsToday: a configuration without anti-flap
// settings prints byte for byte what vigil printed before the rules
// existed. Every shared conformance scenario and the project's own base
// scenarios run both ways, through simulate's round clock and through a
// wall-clock fleet, and both must equal the golden output that the
// previous release printed (testdata/antiflap-golden, made with the
// simulate of commit 25d9c43, before issue 17).
func TestWithoutAntiFlapOutputIsToday(t *testing.T) {
	type sc struct{ name, dir string }
	var all []sc
	add := func(prefix, dir string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Logf("skipping %s: %v", dir, err)
			return
		}
		for _, e := range entries {
			if e.IsDir() {
				all = append(all, sc{prefix + e.Name(), filepath.Join(dir, e.Name())})
			}
		}
	}
	add("conformance-", conformanceDir())
	add("scenarios-", filepath.Join("testdata", "scenarios"))
	all = append(all, sc{"antiflap-base-no-rules", filepath.Join("testdata", "antiflap", "base-no-rules")})
	for _, s := range all {
		t.Run(s.name, func(t *testing.T) {
			cfg, diags := config.Load(filepath.Join(s.dir, "config.hcl"))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			for _, site := range cfg.Sites {
				if site.HealthCheck.AntiFlap != nil {
					t.Fatalf("site %s has anti-flap settings: not a base scenario", site.Name)
				}
			}
			golden, err := os.ReadFile(filepath.Join("testdata", "antiflap-golden", s.name+".jsonl"))
			if err != nil {
				t.Fatalf("no golden output (make it with the simulate of commit 25d9c43): %v", err)
			}
			for _, wall := range []bool{false, true} {
				if got := simulateBytes(t, s.dir, wall); !bytes.Equal(got, golden) {
					t.Errorf("wall clock %v: the output differs from today's\n got: %s\nwant: %s", wall, got, golden)
				}
			}
		})
	}
}
