package simulate_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/simulate"
)

var updatePartition = flag.Bool("update-partition", false, "rewrite testdata/partition/*/expected.jsonl from the current rule")

// TestPartitionScenarios runs the path-partition scenarios of
// docs/partition.md (testdata/partition): the timelines' votes carry
// their voters' labels ("down@pop=eu") and simulate prints the
// path_partition_suspected events the agent would journal.
func TestPartitionScenarios(t *testing.T) {
	dir := filepath.Join("testdata", "partition")
	if *updatePartition {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			sc := filepath.Join(dir, e.Name())
			cfg, steps := loadScenario(t, sc)
			var out bytes.Buffer
			if err := simulate.Run(cfg, steps, &out); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sc, "expected.jsonl"), out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	runScenarios(t, dir)
}

// TestPartitionScenariosAnnounce keeps the scenarios honest: each one
// that says so in its README prints at least one suspicion, and
// really-down prints none.
func TestPartitionScenariosAnnounce(t *testing.T) {
	for _, tc := range []struct {
		name         string
		starts, ends int
	}{
		{"eu-cut-off", 1, 1},
		{"labels-off-by-source", 1, 0},
		{"really-down", 0, 0},
		{"unprobed-rounds-do-not-count", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, steps := loadScenario(t, filepath.Join("testdata", "partition", tc.name))
			var out bytes.Buffer
			if err := simulate.Run(cfg, steps, &out); err != nil {
				t.Fatal(err)
			}
			s := out.String()
			if n := strings.Count(s, `"kind":"path_partition_suspected"`); n != tc.starts+tc.ends {
				t.Errorf("%d path_partition_suspected events, want %d", n, tc.starts+tc.ends)
			}
			if n := strings.Count(s, `"suspected":true`); n != tc.starts {
				t.Errorf("%d starts, want %d", n, tc.starts)
			}
		})
	}
}

// TestPartitionOffRefusesLabels: the same timeline without the partition
// block is refused when it carries labels (the label would be silently
// meaningless), and a label-less one prints no partition event.
func TestPartitionOffRefusesLabels(t *testing.T) {
	cfg, _ := loadScenario(t, filepath.Join("testdata", "partition", "eu-cut-off"))
	cfg.Control.Partition = nil
	_, err := simulate.ParseTimeline(strings.NewReader(`{"round": {"www/a1": {"node": ["down@pop=eu"]}}}`), cfg)
	if err == nil || !strings.Contains(err.Error(), "control { partition") {
		t.Fatalf("labels without the partition block: %v, want an error naming control { partition }", err)
	}
	steps, err := simulate.ParseTimeline(strings.NewReader(strings.Repeat(`{"round": {"www/a1": {"node": ["down"], "direct": ["up"]}}}`+"\n", 4)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := simulate.Run(cfg, steps, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "path_partition_suspected") {
		t.Errorf("without the partition block simulate printed a suspicion:\n%s", out.String())
	}
}

func TestTimelineLabelErrors(t *testing.T) {
	cfg, _ := loadScenario(t, filepath.Join("testdata", "partition", "eu-cut-off"))
	for _, tc := range []struct{ name, vote, want string }{
		{"other label", "down@region=eu", `"@pop=...`},
		{"no value", "down@pop=", "has no value"},
		{"no equals", "down@eu", "name=value"},
		{"bad word", "dwn@pop=eu", "neither"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := simulate.ParseTimeline(strings.NewReader(`{"round": {"www/a1": {"node": ["`+tc.vote+`"]}}}`), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "line 1") {
				t.Fatalf("vote %q: %v, want an error on line 1 saying %q", tc.vote, err, tc.want)
			}
		})
	}
}

func loadScenario(t *testing.T, dir string) (*config.Config, []simulate.Step) {
	t.Helper()
	cfg, diags := config.Load(filepath.Join(dir, "config.hcl"))
	if diags.HasErrors() {
		t.Fatalf("config: %s", diags.Error())
	}
	tl, err := os.Open(filepath.Join(dir, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tl.Close() })
	steps, err := simulate.ParseTimeline(tl, cfg)
	if err != nil {
		t.Fatalf("timeline: %v", err)
	}
	return cfg, steps
}
