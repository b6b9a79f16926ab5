package simulate_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/simulate"
)

// FuzzTimeline feeds arbitrary timelines to the parser and, when they
// parse, to the engine: neither may panic, and a parse error names a line.
func FuzzTimeline(f *testing.F) {
	cfgPath := filepath.Join("testdata", "scenarios", "carry-chain-and-site-subsets", "config.hcl")
	cfg, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		f.Fatal(diags.Error())
	}
	seeds, _ := filepath.Glob(filepath.Join("testdata", "scenarios", "*", "timeline.jsonl"))
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"switch": {"site": "full", "level": 1}}` + "\n" + `{"disable": {"site": "subset", "origin": "a1"}}`))
	f.Add([]byte(`{"round": {"full/x": {}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		steps, err := simulate.ParseTimeline(bytes.NewReader(data), cfg)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "timeline line ") {
				t.Fatalf("error %q does not name the line", err)
			}
			return
		}
		var out bytes.Buffer
		if err := simulate.Run(cfg, steps, &out); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTimelineErrorsNameTheLine(t *testing.T) {
	cfg, diags := config.Load(filepath.Join("testdata", "scenarios", "carry-chain-and-site-subsets", "config.hcl"))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	tests := []struct {
		name, timeline, want string
	}{
		{"bad JSON", "\n{\"round\": {\n", "timeline line 2: not a JSON object"},
		{"unknown source", `{"round": {"full/node-settles": {"nodes": ["up"]}}}`, `timeline line 1: round key "full/node-settles": unknown source "nodes"`},
		{"unknown site", `{"round": {"nope/a1": {"node": ["up"]}}}`, "timeline line 1: round key \"nope/a1\": there is no site named nope"},
		{"unknown origin", `{"round": {"subset/zz": {"node": ["up"]}}}`, "timeline line 1: round key \"subset/zz\": site subset has no origin zz"},
		{"bad vote", `{"round": {"subset/a1": {"node": ["maybe"]}}}`, `vote "maybe" is neither "up" nor "down"`},
		{"not site/origin", `{"round": {"subset": {"node": ["up"]}}}`, `round key "subset" is not "site/origin"`},
		{"two keys", `{"round": {}, "switch": {}}`, "exactly one of"},
		{"unknown kind", `{"pause": {"site": "full"}}`, `unknown line kind "pause"`},
		{"switch without level", `{"switch": {"site": "full"}}`, `switch needs "level"`},
		{"enable without origin", `{"enable": {"site": "full"}}`, `enable needs "origin"`},
		{"unknown action field", `{"disable": {"site": "full", "origin": "a1", "why": "x"}}`, `unknown field "why"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := simulate.ParseTimeline(strings.NewReader(tt.timeline), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
