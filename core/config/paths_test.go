package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRelativePathsFromTheFile: every path attribute written relative is
// taken from the folder of the file that names it, whatever the working
// directory; absolute paths stay as they are; unset ones keep their
// defaults.
func TestRelativePathsFromTheFile(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "conf.d")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(dir, "abs-token")
	files := map[string]string{
		"control.hcl": `
control {
  data_dir   = "../state"
  plugin_dir = "plugins"
  api {
    listen          = "127.0.0.1:0"
    token_file      = "secrets/token"
    read_token_file = "` + abs + `"
  }
}
source "direct" { plugin = "vigil-source-direct" }
source "mine"   { plugin = "./bin/vigil-source-mine" }
notify "webhook" "hook" {
  url_file = "secrets/hook"
}
`,
		"sites.hcl": `
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(sub, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The working directory is elsewhere: it must not matter.
	t.Chdir(t.TempDir())
	cfg, diags := Load(sub)
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	tests := []struct{ name, got, want string }{
		{"data_dir", cfg.Control.DataDir, filepath.Join(dir, "state")},
		{"plugin_dir", cfg.Control.PluginDir, filepath.Join(sub, "plugins")},
		{"token_file", cfg.Control.API.TokenFile, filepath.Join(sub, "secrets", "token")},
		{"read_token_file (absolute)", cfg.Control.API.ReadTokenFile, abs},
		{"node_token_file (unset)", cfg.Control.API.NodeTokenFile, ""},
	}
	for _, src := range cfg.Sources {
		switch src.Name {
		case "direct":
			tests = append(tests, struct{ name, got, want string }{"plugin by name", src.Plugin, "vigil-source-direct"})
		case "mine":
			tests = append(tests, struct{ name, got, want string }{"plugin by path", src.Plugin, filepath.Join(sub, "bin", "vigil-source-mine")})
		}
	}
	if len(cfg.Notifiers) == 1 {
		tests = append(tests, struct{ name, got, want string }{"url_file", cfg.Notifiers[0].URLFile, filepath.Join(sub, "secrets", "hook")})
	} else {
		t.Errorf("%d notifiers, want 1", len(cfg.Notifiers))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
			}
		})
	}
	if len(tests) != 8 {
		t.Errorf("%d paths checked, want 8 (a source is missing)", len(tests))
	}
}

// TestRelativePathsDefaults: data_dir and plugin_dir left unset keep their
// defaults, relative to the working directory.
func TestRelativePathsDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.hcl")
	if err := os.WriteFile(path, []byte(`
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(path)
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	if cfg.Control.DataDir != DefaultDataDir || cfg.Control.PluginDir != DefaultPluginDir {
		t.Errorf("defaults: data_dir %q, plugin_dir %q; want %q, %q", cfg.Control.DataDir, cfg.Control.PluginDir, DefaultDataDir, DefaultPluginDir)
	}
}
