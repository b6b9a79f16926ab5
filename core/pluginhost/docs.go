package pluginhost

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/vigilcdn/vigil/sdk"
)

// Describe starts the plugin of spec as Start does (binary, checksum,
// env), asks for its Info and ConfigSchema, and stops it: it configures
// nothing. `vigil plugin docs` renders what it returns. The schema is
// checked (sdk.Schema.Validate).
func Describe(ctx context.Context, spec Spec) (sdk.Info, sdk.Schema, error) {
	s := New(spec)
	defer s.Close()
	if spec.Checksum != "" {
		sum, err := parseChecksum(spec.Checksum)
		if err != nil {
			return sdk.Info{}, sdk.Schema{}, err
		}
		s.checksum = sum
	}
	proc, err := s.launch()
	if err != nil {
		return sdk.Info{}, sdk.Schema{}, err
	}
	defer proc.stop()
	info, schema, err := s.describe(ctx, proc)
	if err != nil {
		return info, schema, err
	}
	if err := schema.Validate(); err != nil {
		return info, schema, fmt.Errorf("plugin %s: %w", info.Name, err)
	}
	return info, schema, nil
}

// SchemaMarkdown renders a plugin's config attributes as the table of
// docs/config.md ("Plugin settings"): attribute, type, required, meaning
// (the attribute's Description). The configuration reference and `vigil
// plugin docs` both render with it.
func SchemaMarkdown(s sdk.Schema) string {
	var b strings.Builder
	b.WriteString("| attribute | type | required | meaning |\n|---|---|---|---|\n")
	for _, a := range s.Attributes {
		req := "no"
		if a.Required {
			req = "**yes**"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", a.Name, mdCell(a.Type.String()), req, mdCell(docLink.ReplaceAllString(a.Description, "[$1]($1)")))
	}
	return b.String()
}

// docLink makes the mentions of docs/X.md links, as in docs/config.md.
var docLink = regexp.MustCompile(`\bdocs/([a-z]+\.md)\b`)

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
