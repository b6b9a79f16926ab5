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

// TestImportsNothingFromCore: no package under api/, its tests included,
// imports anything under core/, directly or through another package of
// the repository, so that a program talking to an agent never pulls in
// the control plane (docs/CONTRIBUTING.md, "Layout").
func TestImportsNothingFromCore(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var start []string
	err = filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() != "testdata" {
			start = append(start, filepath.ToSlash(filepath.Join(module, "api", p)))
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
			t.Errorf("%s imports the control plane: %s; move the type it needs into api/ and convert in core/httpapi or core/readmodel", chain[0], strings.Join(chain, " -> "))
			continue
		}
		// A package's own tests count only for the packages under api/.
		withTests := strings.HasPrefix(pkg+"/", module+"/api/")
		imports, err := importsOf(filepath.Join(root, strings.TrimPrefix(pkg, module+"/")), withTests)
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
