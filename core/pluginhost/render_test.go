package pluginhost

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestDiagnosticRendersAtFileLine checks what the operator sees: a plugin's
// complaint about a list element, printed by HCL's diagnostic writer with
// the file, line and the offending source line.
func TestDiagnosticRendersAtFileLine(t *testing.T) {
	src := []byte(`source "test" {
  plugin = "vigil-source-test"
  config {
    voter = "v"
    tags  = ["ok", "bad"]
  }
}
`)
	f, diags := hclsyntax.ParseConfig(src, "vigil.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	content, diags := f.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "source", LabelNames: []string{"name"}}}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	block := content.Blocks[0]
	inner, diags := block.Body.Content(&hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "plugin"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "config"}},
	})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s := New(Spec{Name: "test", Plugin: testPlugin, Config: inner.Blocks[0].Body, Range: block.DefRange})
	t.Cleanup(s.Close)
	diags = s.Start(context.Background())
	if !diags.HasErrors() {
		t.Fatal("Start succeeded")
	}
	var out bytes.Buffer
	w := hcl.NewDiagnosticTextWriter(&out, map[string]*hcl.File{"vigil.hcl": f}, 100, false)
	if err := w.WriteDiagnostics(diags); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Error: Bad tag", "on vigil.hcl line 5", `tags  = ["ok", "bad"]`, `Source "test": "bad" is not a tag`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("rendered diagnostic lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}
