package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// metricNameInCode finds the series vigil defines: the names given to
// client_golang (Name: "...", NewDesc("...")) and those the read side
// writes itself ("vigil_site_level{" and the like, or "# TYPE ..." lines).
var metricNameInCode = regexp.MustCompile(`(?:Name:\s*"|NewDesc\(\s*"|# TYPE |WriteString\(\s*"|name, help string\s*}\{\{|\{")(vigil_[a-z_]+)`)

// TestMetricsAreDocumented: every series the code defines is named in
// docs/metrics.md, and the page names none that the code does not define.
func TestMetricsAreDocumented(t *testing.T) {
	root := ".."
	inCode := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "data", "testdata", "node_modules", "sdk":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range metricNameInCode.FindAllStringSubmatch(string(b), -1) {
			inCode[m[1]] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(inCode) < 40 {
		t.Fatalf("found only %d series in the code: the pattern no longer matches how metrics are defined", len(inCode))
	}
	page, err := os.ReadFile("metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(vigil_[a-z_]+)`").FindAllStringSubmatch(string(page), -1) {
		documented[m[1]] = true
	}
	var missing, extra []string
	for name, path := range inCode {
		if !documented[name] {
			missing = append(missing, name+" ("+path+")")
		}
	}
	for name := range documented {
		if _, ok := inCode[name]; !ok {
			extra = append(extra, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("series not in docs/metrics.md:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(extra) > 0 {
		t.Errorf("docs/metrics.md names series the code does not define:\n  %s", strings.Join(extra, "\n  "))
	}
}
