// Package modtest builds Go code as a vendor would: in a temporary module
// of its own that requires the SDK, with a replace to this checkout's sdk/.
// It is for the SDK's and the examples' tests.
package modtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Heavy are modules of the control plane that must never reach a plugin's
// module graph.
var Heavy = []string{"go.etcd.io/etcd", "github.com/chromedp", "go.etcd.io/bbolt", "go.uber.org/zap", "github.com/miekg/dns", "github.com/prometheus"}

// Module writes a module named path in a temporary folder, with files
// (relative name -> content), requiring the SDK at sdkDir (through a
// replace) and the modules of extra ("path version"); it returns the folder.
// go.sum starts as the SDK's own.
func Module(t testing.TB, path, sdkDir string, files map[string]string, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(sdkDir)
	if err != nil {
		t.Fatal(err)
	}
	sdkMod, err := os.ReadFile(filepath.Join(abs, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("module " + path + "\n\ngo 1.26.0\n\nrequire github.com/vigilcdn/vigil/sdk v0.1.0\n")
	// The SDK's own requirements, so that the build resolves offline to
	// the versions the SDK was tested with.
	for _, line := range strings.Split(string(sdkMod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(line, "\t") {
			b.WriteString("require " + f[0] + " " + f[1] + "\n")
		}
	}
	for _, e := range extra {
		b.WriteString("require " + e + "\n")
	}
	b.WriteString("\nreplace github.com/vigilcdn/vigil/sdk => " + abs + "\n")
	files["go.mod"] = b.String()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := os.ReadFile(filepath.Join(abs, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Go runs the go command in dir, offline and outside any workspace, and
// returns its output; it fails the test when the command fails.
func Go(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// Graph returns the module paths of dir's module graph (go list -m all).
func Graph(t testing.TB, dir string) []string {
	t.Helper()
	return strings.Fields(Go(t, dir, "list", "-m", "-e", "-f", "{{.Path}}", "all"))
}

// CheckLight fails the test for every heavy module in graph.
func CheckLight(t testing.TB, graph []string) {
	t.Helper()
	for _, m := range graph {
		for _, h := range Heavy {
			if strings.HasPrefix(m, h) {
				t.Errorf("module graph holds %s, a module of the control plane", m)
			}
		}
	}
}
