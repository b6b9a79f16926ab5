package httpapi

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocListsEveryRoute: doc.go lists every route api.go registers, and
// no other, so that the package doc cannot fall behind the mux again.
func TestDocListsEveryRoute(t *testing.T) {
	// api.go and the route files beside it (drill.go, ...).
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var src []byte
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var registered []string
	for _, m := range regexp.MustCompile(`HandleFunc\("((?:GET|POST|DELETE) [^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		p := m[1]
		if strings.HasSuffix(p, "/{action}") { // the origin actions, listed one by one
			registered = append(registered, strings.Replace(p, "{action}", "disable", 1), strings.Replace(p, "{action}", "enable", 1))
			continue
		}
		registered = append(registered, p)
	}
	if len(registered) < 10 {
		t.Fatalf("found only %q in api.go: the scan lost its way", registered)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^//\t((?:GET|POST|DELETE) +/\S*)`).FindAllStringSubmatch(string(doc), -1) {
		f := strings.Fields(m[1])
		path, _, _ := strings.Cut(f[1], "?")
		listed = append(listed, f[0]+" "+path)
	}
	slices.Sort(registered)
	slices.Sort(listed)
	for _, r := range registered {
		if !slices.Contains(listed, r) {
			t.Errorf("api.go registers %s, which doc.go does not list", r)
		}
	}
	for _, l := range listed {
		if !slices.Contains(registered, l) {
			t.Errorf("doc.go lists %s, which api.go does not register", l)
		}
	}
}
