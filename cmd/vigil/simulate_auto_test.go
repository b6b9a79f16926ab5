package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimulateSaysWhatAutoMeans: with sites_per_round = "auto", simulate
// says on stderr that every round probes every eligible site (a replay
// has no real time to size rounds from); stdout stays the JSON lines. A
// number says nothing.
func TestSimulateSaysWhatAutoMeans(t *testing.T) {
	for _, tt := range []struct {
		perRound string
		note     bool
	}{
		{`"auto"`, true},
		{"500", false},
	} {
		t.Run(tt.perRound, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "vigil.hcl")
			timeline := filepath.Join(dir, "t.jsonl")
			conf := "control {\n  sites_per_round = " + tt.perRound + "\n}\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n" +
				"site \"www\" {\n  hostname = \"www.example.com\"\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" { address = \"http://127.0.0.1:2\" }\n}\n"
			if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(timeline, []byte(`{"round": {"www/a": {"direct": ["down"]}}}`+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if code := run([]string{"simulate", "-config", cfg, "-timeline", timeline}, &out, &errb); code != 0 {
				t.Fatalf("exit %d\nstderr:\n%s", code, errb.String())
			}
			if got := strings.Contains(errb.String(), simulateAutoNote); got != tt.note {
				t.Fatalf("the auto note on stderr: %v, want %v\nstderr:\n%s", got, tt.note, errb.String())
			}
			if !strings.HasPrefix(out.String(), `{"round":1,"site":"www"`) {
				t.Fatalf("stdout is not the JSON lines:\n%s", out.String())
			}
		})
	}
}
