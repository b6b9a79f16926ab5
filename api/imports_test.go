package api

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/vigilcdn/vigil"

// TestImportsNothingFromCore: no package under api/ (its tests included)
// and no package under plugins/ (its tests left out: they start a real
// agent) imports anything under core/, directly or through another
// package of the repository, so that a program talking to an agent never
// pulls in the control plane and a plugin stands on sdk/ alone
// (docs/CONTRIBUTING.md, "Layout"). It reads import paths, so a
// third-party package whose path merely contains "core/" (Envoy's
// envoy/config/core/v3 in plugins/node/xds) is not vigil's core.
func TestImportsNothingFromCore(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir       string
		withTests bool
		fix       string
	}{
		{"api", true, "move the type it needs into api/ and convert in core/httpapi or core/readmodel"},
		{"plugins", false, "a plugin stands on sdk/ alone: move what it needs into sdk/"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			checkNoCoreImports(t, root, tc.dir, tc.withTests, tc.fix)
		})
	}
}

// checkNoCoreImports walks the repository's packages imported from the
// packages under dir (their tests too when withTests) and fails on any
// under core/, naming the whole path of the bad import and fix.
func checkNoCoreImports(t *testing.T, root, dir string, withTests bool, fix string) {
	var start []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() != "testdata" {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			start = append(start, module+"/"+filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// via maps each package of the repository reached to the package
	// that imported it, to name the whole path of a bad import.
	via := map[string]string{}
	queue := append([]string(nil), start...)
	for _, p := range start {
		via[p] = ""
	}
	scanned := 0
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		if pkg == module+"/core" || strings.HasPrefix(pkg, module+"/core/") {
			chain := []string{pkg}
			for p := via[pkg]; p != ""; p = via[p] {
				chain = append([]string{p}, chain...)
			}
			t.Errorf("%s imports the control plane: %s; %s", chain[0], strings.Join(chain, " -> "), fix)
			continue
		}
		// A package's own tests count only for the packages under dir.
		tests := withTests && strings.HasPrefix(pkg+"/", module+"/"+dir+"/")
		imports, err := importsOf(filepath.Join(root, strings.TrimPrefix(pkg, module+"/")), tests)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		scanned++
		for _, imp := range imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if _, seen := via[imp]; !seen {
				via[imp] = pkg
				queue = append(queue, imp)
			}
		}
	}
	if scanned < 2 {
		t.Fatalf("scanned %d packages: the walk lost its way", scanned)
	}
}

// importsOf lists the imports of the Go files in dir, its _test.go files
// too when withTests.
func importsOf(dir string, withTests bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || (!withTests && strings.HasSuffix(n, "_test.go")) {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, s := range f.Imports {
			p, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
	}
	return out, nil
}
