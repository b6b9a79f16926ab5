package modtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repo is the vigil checkout around this module ("" when the SDK is used
// from its module zip, without the rest of the repository).
func repo(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "examples", "tcpcheck")); err != nil {
		t.Skip("not inside the vigil repository")
	}
	return root
}

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// TestREADMESnippetsCompile builds every complete Go program of README.md
// and sdk/README.md as a vendor's module against this SDK alone.
func TestREADMESnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds modules")
	}
	root := repo(t)
	for _, readme := range []string{"README.md", "sdk/README.md"} {
		b, err := os.ReadFile(filepath.Join(root, readme))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range goBlock.FindAllStringSubmatch(string(b), -1) {
			if !strings.HasPrefix(m[1], "package main") {
				continue
			}
			n++
			t.Run(readme, func(t *testing.T) {
				dir := Module(t, "example.com/readme", filepath.Join(root, "sdk"), map[string]string{"main.go": m[1]})
				Go(t, dir, "build", "-o", os.DevNull, ".")
				CheckLight(t, Graph(t, dir))
			})
		}
		if n == 0 {
			t.Errorf("%s has no complete Go program (a ```go block starting with package main)", readme)
		}
	}
}

// TestTCPCheckIsAnOutsideModule builds examples/tcpcheck as a third party
// would: a module of its own that requires only the SDK (and x/sync), whose
// module graph holds none of the control plane's heavy modules.
func TestTCPCheckIsAnOutsideModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds modules")
	}
	root := repo(t)
	src := filepath.Join(root, "examples", "tcpcheck")
	files := map[string]string{}
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		files[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rootMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sync := regexp.MustCompile(`golang.org/x/sync (v\S+)`).FindStringSubmatch(string(rootMod))
	if sync == nil {
		t.Fatal("the root go.mod requires no golang.org/x/sync")
	}
	dir := Module(t, "github.com/vigilcdn/vigil/examples/tcpcheck", filepath.Join(root, "sdk"), files, "golang.org/x/sync "+sync[1])
	rootSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "go.sum"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(rootSum), "\n") {
		if strings.HasPrefix(line, "golang.org/x/sync ") {
			f.WriteString(line + "\n")
		}
	}
	f.Close()
	Go(t, dir, "build", "./...")
	Go(t, dir, "vet", "./...")
	graph := Graph(t, dir)
	CheckLight(t, graph)
	for _, m := range graph {
		if m == "github.com/vigilcdn/vigil" {
			t.Errorf("the module graph holds the control plane's module")
		}
	}
	t.Logf("%d modules in the graph", len(graph))
}
