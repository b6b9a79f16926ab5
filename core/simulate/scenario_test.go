package simulate_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/simulate"
)

// conformanceDir is ../shared/conformance beside the repository, or
// $VIGIL_CONFORMANCE.
func conformanceDir() string {
	if d := os.Getenv("VIGIL_CONFORMANCE"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "..", "shared", "conformance")
}

func TestConformance(t *testing.T) {
	dir := conformanceDir()
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("conformance scenarios not found at %s (a fresh clone has no ../shared; set VIGIL_CONFORMANCE to run them): %v", dir, err)
	}
	runScenarios(t, dir)
}

// TestScenarios runs the project's own scenarios in testdata/scenarios.
func TestScenarios(t *testing.T) {
	runScenarios(t, filepath.Join("testdata", "scenarios"))
}

func runScenarios(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		sc := filepath.Join(dir, e.Name())
		t.Run(e.Name(), func(t *testing.T) { runScenario(t, sc) })
	}
	if n == 0 {
		t.Fatalf("no scenarios in %s", dir)
	}
}

func runScenario(t *testing.T, dir string) {
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
	var out bytes.Buffer
	if err := simulate.Run(cfg, steps, &out); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, "expected.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	got := nonEmptyLines(out.String())
	exp := nonEmptyLines(string(want))
	for i := 0; i < len(got) || i < len(exp); i++ {
		if i >= len(got) {
			t.Fatalf("line %d missing; want %s", i+1, exp[i])
		}
		if i >= len(exp) {
			t.Fatalf("line %d unexpected: %s", i+1, got[i])
		}
		g, e := normalize(t, got[i]), normalize(t, exp[i])
		if !reflect.DeepEqual(g, e) {
			t.Fatalf("line %d differs\n got: %s\nwant: %s", i+1, got[i], exp[i])
		}
	}
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// normalize decodes a line and sorts its events (their order carries no
// meaning). A refused action's error is "any clear message": only its
// presence is compared.
func normalize(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("bad JSON line %q: %v", line, err)
	}
	if ev, ok := m["events"].([]any); ok {
		keys := make([]string, len(ev))
		for i, e := range ev {
			b, _ := json.Marshal(e)
			keys[i] = string(b)
		}
		sort.Strings(keys)
		m["events"] = keys
	}
	if e, ok := m["error"].(string); ok {
		if strings.TrimSpace(e) == "" {
			t.Fatalf("empty error in %q", line)
		}
		m["error"] = "<refused>"
	}
	return m
}
