package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestAlertRules checks the shipped alert rules with promtool, and that
// every vigil series they use is one docs/metrics.md documents.
func TestAlertRules(t *testing.T) {
	need(t, "promtool")
	out, err := exec.Command("promtool", "check", "rules", "prometheus/vigil-alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	rules, err := os.ReadFile("prometheus/vigil-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`\bvigil_[a-z_]+`).FindAllString(string(rules), -1)
	if len(names) == 0 {
		t.Fatal("the rules use no vigil series")
	}
	for _, n := range names {
		if !strings.Contains(string(doc), "`"+n+"`") {
			t.Errorf("the rules use %s, which docs/metrics.md does not document", n)
		}
	}
}
