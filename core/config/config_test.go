package config_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
)

// TestInvalid loads every testdata/invalid-*.hcl and compares its
// diagnostics with the "# want: LINE:COL: Summary; Detail" comments at the
// end of the file, exactly and in order.
func TestInvalid(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "invalid-*.hcl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid configs in testdata: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".hcl"), func(t *testing.T) {
			want := wantLines(t, f)
			if len(want) == 0 {
				t.Fatalf("%s has no # want: lines", f)
			}
			cfg, diags := config.Load(f)
			if !diags.HasErrors() {
				t.Fatalf("loaded without error")
			}
			if cfg == nil || cfg.Files[f] == nil {
				t.Fatalf("Files must hold the parsed file for printing snippets")
			}
			var got []string
			for _, d := range diags {
				if d.Subject == nil {
					t.Fatalf("diagnostic without a source range: %s", d.Summary)
				}
				if d.Subject.Filename != f {
					t.Errorf("diagnostic names file %q, want %q", d.Subject.Filename, f)
				}
				got = append(got, fmt.Sprintf("%d:%d: %s; %s", d.Subject.Start.Line, d.Subject.Start.Column, d.Summary, d.Detail))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("diagnostics differ\n got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			// The printed form carries file:line:col and a snippet.
			var buf bytes.Buffer
			if err := config.WriteDiagnostics(&buf, cfg.Files, diags); err != nil {
				t.Fatal(err)
			}
			first := diags[0]
			loc := fmt.Sprintf("on %s line %d", f, first.Subject.Start.Line)
			if !strings.Contains(buf.String(), loc) || !strings.Contains(buf.String(), "Error: "+first.Summary) {
				t.Fatalf("printed diagnostics lack %q or the summary:\n%s", loc, buf.String())
			}
			if strings.Contains(buf.String(), "\x1b[") {
				t.Fatalf("colour codes written to a non-terminal")
			}
		})
	}
}

func wantLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if w, ok := strings.CutPrefix(sc.Text(), "# want: "); ok {
			out = append(out, w)
		}
	}
	return out
}

func TestSecretsNotEchoed(t *testing.T) {
	_, diags := config.Load(filepath.Join("testdata", "invalid-address-with-credentials.hcl"))
	if strings.Contains(diags.Error(), "hunter2") {
		t.Fatalf("the password appears in the diagnostic: %s", diags.Error())
	}
}

func TestFolderMergesInFileNameOrder(t *testing.T) {
	cfg, diags := config.Load(filepath.Join("testdata", "folder"))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if got := []string{cfg.Sources[0].Name, cfg.Sources[1].Name}; got[0] != "node" || got[1] != "direct" {
		t.Fatalf("chain order %v, want [node direct] (file-name order)", got)
	}
	site := cfg.Site("www")
	if site.Hostname != "www.example.com" {
		t.Errorf("hostname %q, want lower case", site.Hostname)
	}
	if strings.Join(site.Sources, ",") != "node,direct" {
		t.Errorf("site sources %v, want chain order [node direct]", site.Sources)
	}
	if site.Origins[1].Level != 2 || portOf(site.Origins[1].Address) != "8443" {
		t.Errorf("origin b1 = %+v", site.Origins[1])
	}
	// The plugin's config block stays an hcl.Body with its own ranges.
	attrs, d := cfg.Sources[0].Config.JustAttributes()
	if d.HasErrors() {
		t.Fatal(d.Error())
	}
	rng := attrs["nodes_per_round"].Expr.Range()
	if !strings.HasSuffix(rng.Filename, "10-sources.hcl") || rng.Start.Line != 6 {
		t.Fatalf("config block attribute at %s, want 10-sources.hcl line 6", rng)
	}
}

func TestDefaults(t *testing.T) {
	cfg, diags := config.Parse("min.hcl", []byte(`
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	c := cfg.Control
	checks := []struct {
		name      string
		got, want any
	}{
		{"round_interval", c.RoundInterval, 30 * time.Second},
		{"sites_per_round", c.SitesPerRound, 500},
		{"data_dir", c.DataDir, "data"},
		{"plugin_dir", c.PluginDir, "bin"},
		{"api listen", c.API.Listen, "127.0.0.1:8470"},
		{"min_votes", cfg.Sources[0].MinVotes, 1},
		{"tally", cfg.Sources[0].Tally, vote.TallyOwn},
		{"source timeout (its share of the round)", cfg.Sources[0].Timeout, 28 * time.Second},
		{"failback", cfg.Sites[0].Failback, decide.FailbackAuto},
		{"sources", strings.Join(cfg.Sites[0].Sources, ","), "direct"},
		{"enabled", cfg.Sites[0].HealthCheck.Enabled, true},
		{"probe timeout", cfg.Sites[0].HealthCheck.Timeout, 5 * time.Second},
		{"unhealthy_threshold", cfg.Sites[0].HealthCheck.UnhealthyThreshold, 3},
		{"healthy_threshold", cfg.Sites[0].HealthCheck.HealthyThreshold, 2},
		{"user agent", cfg.Sites[0].HealthCheck.UserAgent, "cdnca-control-api/origin-probe"},
		{"level", cfg.Sites[0].Origins[0].Level, 1},
		{"origin enabled", cfg.Sites[0].Origins[0].Enabled, true},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Fatalf("got %v, want %v", c.got, c.want)
			}
		})
	}
}

func TestValidExamples(t *testing.T) {
	for _, path := range []string{"../../examples/quickstart.hcl"} {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		if _, diags := config.Load(path); diags.HasErrors() {
			t.Errorf("%s: %s", path, diags.Error())
		}
	}
	dir := filepath.Join("..", "..", "..", "shared", "conformance")
	matches, _ := filepath.Glob(filepath.Join(dir, "*", "config.hcl"))
	for _, m := range matches {
		if _, diags := config.Load(m); diags.HasErrors() {
			t.Errorf("%s: %s", m, diags.Error())
		}
	}
}

func TestLoadMissingPath(t *testing.T) {
	_, diags := config.Load(filepath.Join(t.TempDir(), "nope.hcl"))
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "Pass -config") {
		t.Fatalf("want a clear error, got %v", diags)
	}
	_, diags = config.Load(t.TempDir())
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "no *.hcl file") {
		t.Fatalf("want a clear error for an empty folder, got %v", diags)
	}
}

// FuzzLoad feeds arbitrary bytes to the loader: it must never panic, and a
// result is either a config or error diagnostics with source ranges.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.hcl"))
	more, _ := filepath.Glob(filepath.Join("testdata", "folder", "*.hcl"))
	for _, s := range append(seeds, more...) {
		b, err := os.ReadFile(s)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`site "x" { origin "y" { address = "http://[::1]:80" level = 1e9 } }`))
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, diags := config.Parse("fuzz.hcl", src)
		if diags.HasErrors() {
			for _, d := range diags {
				if d.Severity == hcl.DiagError && d.Summary == "" {
					t.Fatalf("error diagnostic without a summary")
				}
			}
			return
		}
		if cfg == nil {
			t.Fatal("no config and no error")
		}
		for _, s := range cfg.Sites {
			if s.HealthCheck.Enabled && len(s.Origins) < 2 {
				t.Fatalf("site %s accepted with health checks and %d origins", s.Name, len(s.Origins))
			}
			for _, o := range s.Origins {
				if _, err := url.Parse(o.Address); o.Level < 1 || err != nil || o.Address == "" {
					t.Fatalf("origin %s accepted with level %d address %q", o.Name, o.Level, o.Address)
				}
			}
		}
	})
}

func portOf(address string) string {
	u, err := url.Parse(address)
	if err != nil {
		return ""
	}
	return u.Port()
}
