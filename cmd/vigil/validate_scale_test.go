package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	corepreflight "github.com/vigilcdn/vigil/core/preflight"
)

// TestValidateWarnsOfTheCycle: more eligible sites than sites_per_round
// is a warning (the configuration stays valid) at the sites_per_round
// attribute, or at the control block when it is not written, giving the
// full cycle and the detection time that follows. Sites the scheduler
// never probes (health check off) do not count.
func TestValidateWarnsOfTheCycle(t *testing.T) {
	if binDir == "" {
		t.Skip("vigil validate checks the plugin binaries, which TestMain builds unless -short")
	}
	dir := t.TempDir()
	conf := func(name, control string, sites, paused int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "control {\n  data_dir   = %q\n  plugin_dir = %q\n  round_interval = \"30s\"\n%s}\n", filepath.Join(dir, name, "data"), binDir, control)
		b.WriteString("source \"direct\" { plugin = \"vigil-source-node\" }\n")
		for i := range sites + paused {
			check := ""
			if i >= sites {
				check = "  health_check { enabled = false }\n"
			}
			fmt.Fprintf(&b, "site \"s%04d\" {\n  hostname = \"s%d.example.com\"\n%s  origin \"a1\" { address = \"http://127.0.0.1:1\" }\n  origin \"a2\" { address = \"http://127.0.0.1:2\" }\n}\n", i, i, check)
		}
		sub := filepath.Join(dir, name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(sub, "vigil.hcl")
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name string
		path string
		want []string // in stderr; nil: no warning
		at   string   // the diagnostic's file:line:col
	}{
		{"set: at the attribute", conf("set", "  sites_per_round = 4\n", 10, 3),
			[]string{"More sites than sites_per_round: each site is probed every 1m30s", "vigil.hcl line 5", "10 sites are eligible", "3 rounds", "found unhealthy after about 4m30s (3 cycles"}, "vigil.hcl:5:21"},
		{"unset: at the control block", conf("unset", "", 501, 0),
			[]string{"each site is probed every 1m0s", "vigil.hcl line 1", "at most 500 a round", "after about 3m0s"}, "vigil.hcl:1:1"},
		{"sharded: the whole fleet", conf("sharded", "  sites_per_round = 4\n  store \"etcd\" {\n    endpoints = [\"127.0.0.1:2379\"]\n    mode = \"sharded\"\n  }\n", 5, 0),
			[]string{"the whole fleet has", "each instance probes its share"}, "vigil.hcl:5:21"},
		{"auto: from the size its rounds start at", conf("auto", "  sites_per_round = \"auto\"\n", 501, 0),
			[]string{"More sites than an auto-sized round starts with: each site is probed every 1m0s until the rounds grow", "vigil.hcl line 5", "with sites_per_round = \"auto\": 500 a round at first", "28s budget", "up to every site", "vigil_round_sites_limit"}, "vigil.hcl:5:21"},
		{"auto: no warning when the start covers them", conf("auto-small", "  sites_per_round = \"auto\"\n", 500, 0), nil, ""},
		{"paused sites do not count", conf("paused", "  sites_per_round = 4\n", 4, 10), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run([]string{"validate", "-offline", tt.path}, &out, &errb)
			if code != 0 {
				t.Fatalf("exit %d, want 0 (a warning only)\nstderr:\n%s", code, errb.String())
			}
			has := strings.Contains(errb.String(), "sites_per_round")
			if tt.want == nil && has {
				t.Fatalf("a warning where none is due:\n%s", errb.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
			cfg, diags := config.Load(tt.path)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			at := ""
			for _, d := range corepreflight.Check(context.Background(), cfg, corepreflight.Options{Offline: true}) {
				if strings.HasPrefix(d.Summary, "More sites than") {
					if d.Severity != hcl.DiagWarning || d.Subject == nil {
						t.Fatalf("severity %v, subject %v: want a warning at a range", d.Severity, d.Subject)
					}
					at = fmt.Sprintf("%s:%d:%d", filepath.Base(d.Subject.Filename), d.Subject.Start.Line, d.Subject.Start.Column)
				}
			}
			if at != tt.at {
				t.Errorf("the warning is at %q, want %q", at, tt.at)
			}
		})
	}
}
