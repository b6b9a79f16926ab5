package pluginhost

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// checkRanges are where the test pretends the source block's attributes
// are written.
var checkRanges = map[string]hcl.Range{
	"plugin":   {Filename: "vigil.hcl", Start: hcl.Pos{Line: 2, Column: 15, Byte: 30}, End: hcl.Pos{Line: 2, Column: 30, Byte: 45}},
	"checksum": {Filename: "vigil.hcl", Start: hcl.Pos{Line: 3, Column: 15, Byte: 60}, End: hcl.Pos{Line: 3, Column: 90, Byte: 135}},
	"env":      {Filename: "vigil.hcl", Start: hcl.Pos{Line: 4, Column: 15, Byte: 150}, End: hcl.Pos{Line: 4, Column: 30, Byte: 165}},
}

var blockRange = hcl.Range{Filename: "vigil.hcl", Start: hcl.Pos{Line: 1, Column: 1, Byte: 0}, End: hcl.Pos{Line: 1, Column: 15, Byte: 14}}

func at(name string) hcl.Range { return checkRanges[name] }

// childPlugins returns the live processes of testPlugin that are children
// of the test.
func childPlugins(t *testing.T) map[int]bool {
	t.Helper()
	out := map[int]bool{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) || processGone(pid) {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == testPlugin {
			out[pid] = true
		}
	}
	return out
}

func TestCheck(t *testing.T) {
	b, err := os.ReadFile(testPlugin)
	if err != nil {
		t.Fatal(err)
	}
	good := fmt.Sprintf("sha256:%x", sha256.Sum256(b))
	bad := "sha256:" + strings.Repeat("ab", 32)
	runs := filepath.Join(t.TempDir(), "runs")
	script := filepath.Join(t.TempDir(), "vigil-source-script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho ran >> "+runs+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIGIL_CHECK_SET", "yes")
	for _, tc := range []struct {
		name    string
		spec    Spec
		config  string
		offline bool
		noAt    bool // no At: diagnostics point at Spec.Range
		// want is the first diagnostic: severity, summary, substrings of the
		// detail and the attribute it points at ("" for the block); an empty
		// summary wants no diagnostic at all.
		sev     hcl.DiagnosticSeverity
		summary string
		detail  []string
		attr    string
		starts  uint64
	}{
		{name: "valid", spec: Spec{Plugin: testPlugin, Checksum: good, Env: []string{"VIGIL_CHECK_SET"}}, config: `voter = "v"`, starts: 1},
		{name: "valid offline", spec: Spec{Plugin: testPlugin, Checksum: good}, config: `voter = "v"`, offline: true},
		{name: "missing binary", spec: Spec{Plugin: "vigil-source-nonexistent", PluginDir: t.TempDir()}, config: `voter = "v"`,
			sev: hcl.DiagError, summary: "Cannot start vote-source plugin", detail: []string{`Source "test"`, `"vigil-source-nonexistent" not found`, "make build", "set plugin_dir"}, attr: "plugin"},
		{name: "missing binary offline", spec: Spec{Plugin: "/nonexistent/vigil-source-x"}, config: `voter = "v"`, offline: true,
			sev: hcl.DiagError, summary: "Cannot start vote-source plugin", detail: []string{"/nonexistent/vigil-source-x", "no such file"}, attr: "plugin"},
		{name: "missing binary without At", spec: Spec{Plugin: "/nonexistent/vigil-source-x"}, config: `voter = "v"`, noAt: true,
			sev: hcl.DiagError, summary: "Cannot start vote-source plugin", detail: []string{"/nonexistent/vigil-source-x"}},
		{name: "checksum mismatch", spec: Spec{Plugin: testPlugin, Checksum: bad}, config: `voter = "v"`,
			sev: hcl.DiagError, summary: "Plugin binary does not match its checksum", detail: []string{"has checksum " + good, "expects " + bad, "put its new sum in `checksum`"}, attr: "checksum"},
		{name: "checksum mismatch offline", spec: Spec{Plugin: testPlugin, Checksum: bad}, config: `voter = "v"`, offline: true,
			sev: hcl.DiagError, summary: "Plugin binary does not match its checksum", detail: []string{"has checksum " + good}, attr: "checksum"},
		{name: "checksum malformed", spec: Spec{Plugin: testPlugin, Checksum: "md5:1234"}, config: `voter = "v"`,
			sev: hcl.DiagError, summary: "Invalid plugin checksum", detail: []string{"64 hex digits"}, attr: "checksum"},
		{name: "env not set", spec: Spec{Plugin: testPlugin, Env: []string{"VIGIL_CHECK_SET", "VIGIL_CHECK_UNSET"}}, config: `voter = "v"`,
			sev: hcl.DiagWarning, summary: "Environment variables not set", detail: []string{"VIGIL_CHECK_UNSET", "Export them"}, attr: "env", starts: 1},
		{name: "config typo", spec: Spec{Plugin: testPlugin}, config: "voter = \"v\"\nintervall = \"1s\"",
			sev: hcl.DiagError, summary: "Unsupported argument", detail: []string{`"intervall"`, `Did you mean "interval"?`}, attr: "config:2", starts: 1},
		{name: "config typo offline", spec: Spec{Plugin: testPlugin}, config: "voter = \"v\"\nintervall = \"1s\"", offline: true},
		{name: "config wrong type", spec: Spec{Plugin: testPlugin}, config: "voter = \"v\"\ncount = \"three\"",
			sev: hcl.DiagError, summary: "Incorrect attribute value type", detail: []string{`"count"`, "number is required"}, attr: "config:2", starts: 1},
		{name: "configure refuses", spec: Spec{Plugin: testPlugin}, config: "voter = \"has space\"",
			sev: hcl.DiagError, summary: "Invalid voter id", detail: []string{`Source "test"`, "use letters"}, attr: "config:1", starts: 1},
		{name: "offline runs nothing", spec: Spec{Plugin: script}, config: `voter = "v"`, offline: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			spec.Name, spec.Config, spec.Range = "test", parseConfig(t, tc.config), blockRange
			before := childPlugins(t)
			src := New(spec)
			opts := CheckOptions{Offline: tc.offline, At: at}
			if tc.noAt {
				opts.At = nil
			}
			diags := src.Check(context.Background(), opts)
			if tc.summary == "" {
				if len(diags) > 0 {
					t.Fatalf("Check: %v", diags)
				}
			} else {
				if len(diags) == 0 {
					t.Fatal("Check found nothing")
				}
				d := diags[0]
				if d.Severity != tc.sev || d.Summary != tc.summary {
					t.Errorf("got %v %q, want %v %q (%v)", d.Severity, d.Summary, tc.sev, tc.summary, diags)
				}
				for _, w := range tc.detail {
					if !strings.Contains(d.Detail, w) {
						t.Errorf("detail %q lacks %q", d.Detail, w)
					}
				}
				want := blockRange
				if line, ok := strings.CutPrefix(tc.attr, "config:"); ok {
					want = hcl.Range{Filename: "config.hcl"}
					want.Start.Line, _ = strconv.Atoi(line)
				} else if tc.attr != "" {
					want = checkRanges[tc.attr]
				}
				if d.Subject == nil || d.Subject.Filename != want.Filename || d.Subject.Start.Line != want.Start.Line {
					t.Errorf("subject %v, want %s:%d", d.Subject, want.Filename, want.Start.Line)
				}
			}
			if got := src.Stats().Starts; got != tc.starts {
				t.Errorf("plugin started %d times, want %d", got, tc.starts)
			}
			if _, err := os.Stat(runs); err == nil {
				t.Errorf("the offline check ran the binary")
			}
			if src.PID() != 0 {
				t.Errorf("a plugin still runs after Check")
			}
			for pid := range childPlugins(t) {
				if !before[pid] {
					t.Errorf("plugin process %d outlived Check", pid)
				}
			}
			if d := src.Start(context.Background()); !d.HasErrors() || d[0].Summary != "Vote source closed" {
				t.Errorf("Start after Check = %v, want the source closed", d)
			}
		})
	}
}
