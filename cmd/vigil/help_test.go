package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/cli")

// golden compares got with testdata/cli/NAME, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "cli", name)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/vigil -run %s -update to write it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test ./cmd/vigil -run %s -update rewrites it)\n--- got:\n%s\n--- want:\n%s", path, t.Name(), got, want)
	}
}

// TestHelpGolden: every command's help, however it is asked for (-h,
// -help, vigil help CMD), is the same text on stdout with exit 0, and is
// the text under testdata/cli.
func TestHelpGolden(t *testing.T) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Setenv("VIGIL_ADDR", "") // the -address default shows in the help
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			words := strings.Fields(name)
			var first string
			for i, args := range [][]string{
				append(append([]string{}, words...), "-h"),
				append(append([]string{}, words...), "-help"),
				append([]string{"help"}, words...),
			} {
				var out, errb bytes.Buffer
				if code := run(args, &out, &errb); code != 0 || errb.Len() > 0 {
					t.Fatalf("vigil %s: exit %d, stderr %q; want 0 and nothing", strings.Join(args, " "), code, errb.String())
				}
				if !strings.HasPrefix(out.String(), "Usage: vigil "+name) {
					t.Fatalf("vigil %s: help does not start with its usage line:\n%s", strings.Join(args, " "), out.String())
				}
				if i == 0 {
					first = out.String()
				} else if out.String() != first {
					t.Fatalf("vigil %s gives another help than vigil %s -h", strings.Join(args, " "), name)
				}
			}
			golden(t, "help-"+strings.ReplaceAll(name, " ", "-")+".txt", first)
		})
	}
	t.Run("top level", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run([]string{"-help"}, &out, &errb); code != 0 {
			t.Fatalf("exit %d", code)
		}
		golden(t, "help.txt", out.String())
	})
}

// TestErrorsGolden: what the CLI says, and its exit code, for the usage
// mistakes an operator makes.
func TestErrorsGolden(t *testing.T) {
	// agent-without-config shows the default path missing, whatever this
	// machine has there.
	old := defaultConfigPath
	t.Cleanup(func() { defaultConfigPath = old })
	defaultConfigPath = "/nonexistent/etc/vigil/vigil.hcl"
	t.Setenv("VIGIL_ADDR", "")
	t.Setenv("VIGIL_TOKEN", "")
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"no-command", nil, 2},
		{"unknown-command", []string{"stauts"}, 2},
		{"unknown-top-flag", []string{"-verbose"}, 2},
		{"unknown-flag", []string{"status", "-jsn"}, 2},
		{"flag-needs-value", []string{"status", "-address"}, 2},
		{"bad-log-level", []string{"agent", "-config", "x.hcl", "-log-level", "verbose"}, 2},
		{"agent-without-config", []string{"agent"}, 2},
		{"agent-positional", []string{"agent", "x.hcl"}, 2},
		{"origin-alone", []string{"origin"}, 2},
		{"origin-typo", []string{"origin", "disabel", "www", "a1"}, 2},
		{"origin-missing-args", []string{"origin", "disable", "www"}, 2},
		{"switch-level-not-number", []string{"switch", "www", "two"}, 2},
		{"state-typo", []string{"state", "chek"}, 2},
		{"validate-nothing", []string{"validate"}, 2},
		{"events-positional", []string{"events", "www"}, 2},
		{"simulate-missing", []string{"simulate", "-config", "x.hcl"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, &out, &errb)
			if code != tt.code {
				t.Fatalf("vigil %s: exit %d, want %d\n%s", strings.Join(tt.args, " "), code, tt.code, errb.String())
			}
			golden(t, "error-"+tt.name+".txt", "$ vigil "+strings.Join(tt.args, " ")+"\n"+out.String()+errb.String())
		})
	}
}

// TestVersion: -version, --version and vigil version all print one line
// with the version and a commit.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"--version"}, {"version"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("vigil %v: exit %d %s", args, code, errb.String())
		}
		if got := out.String(); !strings.HasPrefix(got, "vigil "+version+" (commit ") || strings.Count(got, "\n") != 1 {
			t.Errorf("vigil %v printed %q", args, got)
		}
	}
}
