package preflight_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/preflight"
	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

const nodeTokenEnv = "VIGIL_PREFLIGHT_NODE_TOKEN"

// cfgText is a test configuration in parts; render writes it out.
type cfgText struct {
	DataDir string // "" is a folder in the test's directory
	Control string // more control attributes
	API     string // the api block's body
	Sources string
	Check   string // the site's health_check body
	Extra   string // more top-level blocks
	// Marker, when set by a case's setup, replaces the case's marker.
	Marker string
}

func nodeSource(listen, more string) string {
	return fmt.Sprintf(`
source "node" {
  plugin = "vigil-source-node"
  env    = [%q]
  config {
    listen    = %q
    token_env = %q
    %s
  }
}
`, nodeTokenEnv, listen, nodeTokenEnv, more)
}

func directSource(more string) string {
	return fmt.Sprintf("\nsource \"direct\" {\n  plugin = \"vigil-source-direct\"\n  %s\n}\n", more)
}

func defaults() *cfgText {
	return &cfgText{
		API:     `listen = "127.0.0.1:0"`,
		Sources: nodeSource("127.0.0.1:0", "") + directSource(""),
	}
}

func (c *cfgText) render(dir string) string {
	dataDir := c.DataDir
	if dataDir == "" {
		dataDir = filepath.Join(dir, "data")
	}
	return fmt.Sprintf(`control {
  plugin_dir = %q
  data_dir   = %q
  %s
  api {
    %s
  }
}
%s
site "www" {
  hostname = "www.example.com"
  health_check {
    %s
  }
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = "http://127.0.0.1:2"
    level   = 2
  }
}
%s`, binDir, dataDir, c.Control, c.API, c.Sources, c.Check, c.Extra)
}

// held returns a loopback address that the test holds, as a running
// agent would.
func held(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// lineOf is the line of text where marker first appears.
func lineOf(t *testing.T, text, marker string) int {
	t.Helper()
	i := strings.Index(text, marker)
	if i < 0 {
		t.Fatalf("marker %q is not in the configuration", marker)
	}
	return strings.Count(text[:i], "\n") + 1
}

// validate is what `vigil validate` runs: the loader, then the preflight
// when the loader found no error.
func validate(t *testing.T, path string, offline bool) hcl.Diagnostics {
	t.Helper()
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		return diags
	}
	logs := &sdktest.LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("check logs:\n%s", logs)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return append(diags, preflight.Check(ctx, cfg, preflight.Options{
		Offline: offline,
		Logger:  hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}),
	})...)
}

func TestCheck(t *testing.T) {
	t.Setenv(nodeTokenEnv, "node-secret")
	var releasedAddr string
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, c *cfgText)
		offline bool
		// want: the diagnostic of this severity and summary, with these
		// substrings in its detail, at the line of marker; none: no
		// diagnostic at all.
		sev     hcl.DiagnosticSeverity
		summary string
		detail  []string
		marker  string
		after   func(t *testing.T)
	}{
		{
			name: "valid",
			setup: func(t *testing.T, c *cfgText) {
				releasedAddr = testnet.Addr(t)
				c.Sources = nodeSource(releasedAddr, `nodes_per_round = 2`) + directSource("")
				c.Extra = "publish \"dns\" {\n  listen = \"127.0.0.1:0\"\n  zone   = \"cdn.example.net.\"\n}\n"
			},
			after: func(t *testing.T) {
				// The node plugin's Configure bound the gateway's address;
				// the check let it go.
				ln, err := net.Listen("tcp", releasedAddr)
				if err != nil {
					t.Fatalf("the node gateway's address is still held after the check: %v", err)
				}
				ln.Close()
			},
		},
		{
			name: "typo in a plugin's config block",
			setup: func(t *testing.T, c *cfgText) {
				c.Sources = nodeSource("127.0.0.1:0", `nodes_per_rund = 2`) + directSource("")
			},
			sev: hcl.DiagError, summary: "Unsupported argument",
			detail: []string{`"nodes_per_rund" is not expected here`, `Did you mean "nodes_per_round"?`},
			marker: "nodes_per_rund",
		},
		{
			name: "wrong type in a plugin's config block",
			setup: func(t *testing.T, c *cfgText) {
				c.Sources = nodeSource("127.0.0.1:0", `nodes_per_round = "three"`) + directSource("")
			},
			sev: hcl.DiagError, summary: "Incorrect attribute value type",
			detail: []string{`"nodes_per_round"`, "a number is required"},
			marker: `nodes_per_round = "three"`,
		},
		{
			name: "plugin's own check",
			setup: func(t *testing.T, c *cfgText) {
				c.Sources = nodeSource("127.0.0.1:0", `nodes_per_round = 1000`) + directSource("")
			},
			sev: hcl.DiagError, summary: "Invalid nodes_per_round",
			detail: []string{`Source "node"`, "use a whole number from 1 to 100"},
			marker: "nodes_per_round = 1000",
		},
		{
			name: "missing plugin binary",
			setup: func(t *testing.T, c *cfgText) {
				c.Sources = strings.Replace(c.Sources, `"vigil-source-direct"`, `"vigil-source-dirct"`, 1)
			},
			sev: hcl.DiagError, summary: "Cannot start vote-source plugin",
			detail: []string{`Source "direct"`, `"vigil-source-dirct" not found in plugin_dir`, "build it", "set plugin_dir, or give its path"},
			marker: `"vigil-source-dirct"`,
		},
		{
			name: "checksum mismatch",
			setup: func(t *testing.T, c *cfgText) {
				c.Sources = nodeSource("127.0.0.1:0", "") + directSource(`checksum = "sha256:`+strings.Repeat("0", 64)+`"`)
			},
			sev: hcl.DiagError, summary: "Plugin binary does not match its checksum",
			detail: []string{`Source "direct"`, "has checksum sha256:", "expects sha256:" + strings.Repeat("0", 64), "put its new sum in `checksum`"},
			marker: "checksum =",
		},
		{
			name:  "API listen port out of range",
			setup: func(t *testing.T, c *cfgText) { c.API = `listen = "127.0.0.1:99999"` },
			sev:   hcl.DiagError, summary: "Invalid listen address",
			detail: []string{`control { api { listen } } = "127.0.0.1:99999"`, "invalid port", "port from 0 to 65535"},
			marker: `"127.0.0.1:99999"`,
		},
		{
			name:    "API listen port out of range, offline",
			setup:   func(t *testing.T, c *cfgText) { c.API = `listen = "127.0.0.1:99999"` },
			offline: true,
			sev:     hcl.DiagError, summary: "Invalid listen address",
			detail: []string{"invalid port"},
			marker: `"127.0.0.1:99999"`,
		},
		{
			name: "DNS listen port out of range",
			setup: func(t *testing.T, c *cfgText) {
				c.Extra = "publish \"dns\" {\n  zone   = \"cdn.example.net.\"\n  listen = \"127.0.0.1:99999\"\n}\n"
			},
			sev: hcl.DiagError, summary: "Invalid listen address",
			detail: []string{`publish "dns" { listen } = "127.0.0.1:99999"`, "invalid port", "port from 0 to 65535"},
			marker: `"127.0.0.1:99999"`,
		},
		{
			name: "API and DNS on one port",
			setup: func(t *testing.T, c *cfgText) {
				c.API = `listen = "127.0.0.1:18999"`
				c.Extra = "publish \"dns\" {\n  listen = \"0.0.0.0:18999\"\n  zone   = \"cdn.example.net.\"\n}\n"
			},
			offline: true, // the collision needs no bind
			sev:     hcl.DiagError, summary: "Listen addresses collide",
			detail: []string{"same TCP port", "Give one of them another port"},
			marker: `"127.0.0.1:18999"`,
		},
		{
			name: "API listen address in use",
			setup: func(t *testing.T, c *cfgText) {
				c.Marker = held(t)
				c.API = fmt.Sprintf("listen = %q", c.Marker)
			},
			sev: hcl.DiagWarning, summary: "Listen address in use",
			detail: []string{`control { api { listen } }`, "address already in use", "expected while an agent with this configuration runs here"},
		},
		{
			name: "DNS listen address in use",
			setup: func(t *testing.T, c *cfgText) {
				c.Marker = held(t)
				c.Extra = fmt.Sprintf("publish \"dns\" {\n  zone   = \"cdn.example.net.\"\n  listen = %q\n}\n", c.Marker)
			},
			sev: hcl.DiagWarning, summary: "Listen address in use",
			detail: []string{`publish "dns" { listen }`, "address already in use", "expected while an agent with this configuration runs here"},
		},
		{
			name: "node gateway address in use",
			setup: func(t *testing.T, c *cfgText) {
				c.Marker = held(t)
				c.Sources = nodeSource(c.Marker, "") + directSource("")
			},
			sev: hcl.DiagWarning, summary: "Cannot listen for nodes (address in use)",
			detail: []string{`Source "node"`, "address already in use", "expected while an agent with this configuration runs here", "went unchecked"},
		},
		{
			name:  "API token not set",
			setup: func(t *testing.T, c *cfgText) { c.API += "\n    token_env = \"VIGIL_PREFLIGHT_UNSET\"" },
			sev:   hcl.DiagError, summary: "API token not set",
			detail: []string{"VIGIL_PREFLIGHT_UNSET", "refuses to start", "Export VIGIL_PREFLIGHT_UNSET"},
			marker: "token_env = \"VIGIL_PREFLIGHT_UNSET\"",
		},
		{
			name:    "API token not set, offline",
			setup:   func(t *testing.T, c *cfgText) { c.API += "\n    token_env = \"VIGIL_PREFLIGHT_UNSET\"" },
			offline: true,
			sev:     hcl.DiagWarning, summary: "API token not set",
			detail: []string{"VIGIL_PREFLIGHT_UNSET"},
			marker: "token_env = \"VIGIL_PREFLIGHT_UNSET\"",
		},
		{
			name: "API token_file empty",
			setup: func(t *testing.T, c *cfgText) {
				f := filepath.Join(t.TempDir(), "token")
				if err := os.WriteFile(f, []byte("\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				c.API += fmt.Sprintf("\n    token_file = %q", f)
			},
			sev: hcl.DiagError, summary: "Empty API token_file",
			detail: []string{"is empty", "Write the token in it"},
			marker: "token_file =",
		},
		{
			name: "data_dir is a file",
			setup: func(t *testing.T, c *cfgText) {
				c.DataDir = filepath.Join(t.TempDir(), "state")
				if err := os.WriteFile(c.DataDir, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			},
			offline: true,
			sev:     hcl.DiagError, summary: "data_dir is not a folder",
			detail: []string{"is a file", "Point data_dir at a folder"},
			marker: "data_dir   =",
		},
		{
			name: "site timeout longer than its source's deadline",
			setup: func(t *testing.T, c *cfgText) {
				c.Sources = directSource(`timeout = "10s"`)
				c.Check = `timeout = "12s"`
			},
			// The loader refuses it: the engine never shortens a timeout
			// that is set.
			sev: hcl.DiagError, summary: "Probe timeout does not fit the source's deadline",
			detail: []string{`source "direct" has 10s a round`, "Lower timeout to 8.5s or less"},
			marker: `timeout = "12s"`,
		},
		{
			name: "default probe timeout shortened by round_interval",
			setup: func(t *testing.T, c *cfgText) {
				c.Control = `round_interval = "4s"`
				c.Sources = directSource("")
			},
			sev: hcl.DiagWarning, summary: "Probe timeout shortened to fit the source's deadline",
			detail: []string{`Source "direct" has 3.6s a round (its share of round_interval 4s)`, `("www") probe with 2.88s, not the default 5s`,
				"says nothing", "deadline of at least 6.25s", "set health_check { timeout } to 2.88s or less"},
			marker: "round_interval =",
		},
		{
			name: "default probe timeout shortened by a source timeout",
			setup: func(t *testing.T, c *cfgText) {
				c.Sources = nodeSource("127.0.0.1:0", "") + directSource(`timeout = "3s"`)
			},
			sev: hcl.DiagWarning, summary: "Probe timeout shortened to fit the source's deadline",
			detail: []string{`Source "direct" has 3s a round (its timeout)`, "probe with 2.4s", "deadline of at least 6.25s"},
			marker: `timeout = "3s"`,
		},
		{
			name: "offline: a typo in a config block is not seen",
			setup: func(t *testing.T, c *cfgText) {
				c.Sources = nodeSource("127.0.0.1:0", `nodes_per_rund = 2`) + directSource("")
			},
			offline: true,
		},
		{
			name: "offline: a missing binary is",
			setup: func(t *testing.T, c *cfgText) {
				c.Sources = strings.Replace(c.Sources, `"vigil-source-direct"`, `"vigil-source-dirct"`, 1)
			},
			offline: true,
			sev:     hcl.DiagError, summary: "Cannot start vote-source plugin",
			detail: []string{`"vigil-source-dirct" not found in plugin_dir`},
			marker: `"vigil-source-dirct"`,
		},
		{
			name: "offline: a checksum mismatch is",
			setup: func(t *testing.T, c *cfgText) {
				c.Sources = directSource(`checksum = "sha256:` + strings.Repeat("0", 64) + `"`)
			},
			offline: true,
			sev:     hcl.DiagError, summary: "Plugin binary does not match its checksum",
			detail: []string{"expects sha256:" + strings.Repeat("0", 64)},
			marker: "checksum =",
		},
		{
			name: "offline: no plugin runs",
			setup: func(t *testing.T, c *cfgText) {
				dir := t.TempDir()
				ran := filepath.Join(dir, "ran")
				script := filepath.Join(dir, "vigil-source-script")
				if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				c.Sources = strings.Replace(directSource(""), `"vigil-source-direct"`, fmt.Sprintf("%q", script), 1)
				t.Cleanup(func() {
					if _, err := os.Stat(ran); err == nil {
						t.Error("the offline check ran the plugin binary")
					}
				})
			},
			offline: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := defaults()
			tc.setup(t, c)
			text := c.render(dir)
			path := filepath.Join(dir, "vigil.hcl")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			diags := validate(t, path, tc.offline)
			if tc.after != nil {
				tc.after(t)
			}
			if tc.summary == "" {
				if len(diags) > 0 {
					t.Fatalf("want no diagnostic, got:\n%s", diags.Error())
				}
				return
			}
			var d *hcl.Diagnostic
			for _, x := range diags {
				if x.Summary == tc.summary {
					d = x
					break
				}
			}
			if d == nil {
				t.Fatalf("no %q diagnostic; got:\n%s", tc.summary, diags.Error())
			}
			if d.Severity != tc.sev {
				t.Errorf("severity %v, want %v", d.Severity, tc.sev)
			}
			if tc.sev == hcl.DiagWarning && diags.HasErrors() {
				t.Errorf("want warnings only, got errors:\n%s", diags.Error())
			}
			for _, w := range tc.detail {
				if !strings.Contains(d.Detail, w) {
					t.Errorf("detail %q lacks %q", d.Detail, w)
				}
			}
			marker := tc.marker
			if c.Marker != "" {
				marker = c.Marker
			}
			wantLine := lineOf(t, text, marker)
			if d.Subject == nil || d.Subject.Filename != path || d.Subject.Start.Line != wantLine {
				t.Errorf("subject %v, want %s:%d (%q)", d.Subject, path, wantLine, marker)
			}
		})
	}
}

// TestCheckWithoutText: once the files' text is dropped (an agent that
// started), diagnostics point at the block instead of the attribute.
func TestCheckWithoutText(t *testing.T) {
	dir := t.TempDir()
	c := defaults()
	c.Sources = directSource(`checksum = "sha256:` + strings.Repeat("0", 64) + `"`)
	text := c.render(dir)
	path := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	cfg.ForgetText()
	diags = preflight.Check(context.Background(), cfg, preflight.Options{Offline: true})
	if len(diags) != 1 || diags[0].Summary != "Plugin binary does not match its checksum" {
		t.Fatalf("diagnostics: %v", diags)
	}
	if s, want := diags[0].Subject, lineOf(t, text, `source "direct"`); s == nil || s.Filename != path || s.Start.Line != want {
		t.Errorf("subject %v, want %s:%d", s, path, want)
	}
}
