package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateRunsTheAgentsChecks: vigil validate launches the real
// plugins to check their config blocks (core/preflight), reports each
// mistake at its line, takes folders and several paths, and -offline skips
// what needs a plugin to run.
func TestValidateRunsTheAgentsChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("launches the real plugins")
	}
	t.Setenv("VIGIL_VALIDATE_NODE_TOKEN", "n")
	dir := t.TempDir()
	conf := func(name, nodeConfig, plugin, listen string) string {
		sub := filepath.Join(dir, name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`control {
  data_dir   = %q
  plugin_dir = %q
  api { listen = %q }
}
source "node" {
  plugin = %q
  env    = ["VIGIL_VALIDATE_NODE_TOKEN"]
  config {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_VALIDATE_NODE_TOKEN"
    %s
  }
}
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}
`, filepath.Join(sub, "data"), binDir, listen, plugin, nodeConfig)
		if err := os.WriteFile(filepath.Join(sub, "vigil.hcl"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return sub
	}
	good := conf("good", "nodes_per_round = 2", "vigil-source-node", "127.0.0.1:0")
	typo := conf("typo", "nodes_per_rund = 2", "vigil-source-node", "127.0.0.1:0")
	wrongType := conf("type", `nodes_per_round = "three"`, "vigil-source-node", "127.0.0.1:0")
	missing := conf("missing", "", "vigil-source-nope", "127.0.0.1:0")
	badListen := conf("listen", "", "vigil-source-node", "127.0.0.1:99999")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"valid folder, plugins launched", []string{good}, 0, []string{good + ": configuration is valid", "plugins launched and configured"}, nil},
		{"typo in config {}", []string{typo}, 1, nil, []string{"Unsupported argument", `Did you mean "nodes_per_round"?`, "vigil.hcl line 12", "configuration is not valid"}},
		{"typo passes offline", []string{"-offline", typo}, 0, []string{"offline: plugins not launched"}, nil},
		{"wrong type in config {}", []string{wrongType}, 1, nil, []string{"Incorrect attribute value type", "vigil.hcl line 12"}},
		{"missing binary, even offline", []string{"-offline", missing}, 1, nil, []string{`"vigil-source-nope" not found`, "vigil.hcl line 7"}},
		{"listen port out of range", []string{"-offline", badListen}, 1, nil, []string{"99999", "vigil.hcl line 4"}},
		{"several paths: each reported", []string{good, typo, missing}, 1, []string{good + ": configuration is valid"}, []string{typo + ": configuration is not valid", missing + ": configuration is not valid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"validate"}, tt.args...), &out, &errb)
			ok := code == tt.code
			for _, w := range tt.stdout {
				ok = ok && strings.Contains(out.String(), w)
			}
			for _, w := range tt.stderr {
				ok = ok && strings.Contains(errb.String(), w)
			}
			if !ok {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s\nwant stdout %q, stderr %q", code, tt.code, out.String(), errb.String(), tt.stdout, tt.stderr)
			}
		})
	}
}
