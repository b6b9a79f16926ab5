package pluginhost

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/plugins/direct"
	"github.com/vigilcdn/vigil/plugins/dnspup"
	"github.com/vigilcdn/vigil/plugins/node"
	"github.com/vigilcdn/vigil/sdk"
)

// TestSchemaMarkdownIsTheReferences: docs/config.md holds, for each shipped
// plugin, exactly the table SchemaMarkdown renders (what `vigil plugin docs`
// prints), so the two cannot drift apart.
func TestSchemaMarkdownIsTheReferences(t *testing.T) {
	ref, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []sdk.BasePlugin{direct.New(nil), node.New(nil), dnspup.New(nil, dnspup.Options{})} {
		s, err := p.ConfigSchema(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		info, _ := p.Info(context.Background())
		if table := SchemaMarkdown(s); !strings.Contains(string(ref), table) {
			t.Errorf("docs/config.md lacks the table of %s that vigil plugin docs renders:\n%s", info.Name, table)
		}
	}
}

func TestDescribe(t *testing.T) {
	info, schema, err := Describe(context.Background(), Spec{Name: "test", Plugin: testPlugin})
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "testsource" || len(schema.Attributes) == 0 || schema.Attributes[0].Name != "voter" {
		t.Errorf("Describe = %+v, %+v", info, schema)
	}
}
