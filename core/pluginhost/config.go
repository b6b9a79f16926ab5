package pluginhost

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/gocty"

	"github.com/vigilcdn/vigil/sdk"
)

// decodeConfig decodes body against the plugin's schema. Type errors,
// unknown and missing attributes and bad durations come back as diagnostics
// at the attribute's range.
func decodeConfig(body hcl.Body, schema sdk.Schema, blockRange hcl.Range) (sdk.Config, hcl.Diagnostics) {
	cfg := sdk.Config{Values: map[string]any{}}
	if body == nil {
		body = hcl.EmptyBody()
	}
	if err := schema.Validate(); err != nil {
		return cfg, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Plugin declares an invalid config schema",
			Detail:   fmt.Sprintf("The plugin's ConfigSchema is refused (%v): a bug of the plugin, which its author's sdktest tests report; vigil does not use it.", err),
			Subject:  blockRange.Ptr(),
		}}
	}
	spec := hcldec.ObjectSpec{}
	for _, a := range schema.Attributes {
		var typ cty.Type
		switch a.Type {
		case sdk.TypeString, sdk.TypeDuration:
			typ = cty.String
		case sdk.TypeNumber:
			typ = cty.Number
		case sdk.TypeBool:
			typ = cty.Bool
		case sdk.TypeStringList:
			typ = cty.List(cty.String)
		default:
			return cfg, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Plugin declares an unsupported config attribute type",
				Detail:   fmt.Sprintf("The plugin's schema gives attribute %q the type %v, which this vigil does not know. Update vigil or the plugin.", a.Name, a.Type),
				Subject:  blockRange.Ptr(),
			}}
		}
		spec[a.Name] = &hcldec.AttrSpec{Name: a.Name, Type: typ, Required: a.Required}
	}
	val, diags := hcldec.Decode(body, spec, nil)
	for i := range diags {
		if diags[i].Subject == nil || diags[i].Subject.Filename == "" {
			diags[i].Subject = blockRange.Ptr()
		}
	}
	if diags.HasErrors() {
		return cfg, diags
	}
	attrs := attributeRanges(body, schema)
	for _, a := range schema.Attributes {
		v := val.GetAttr(a.Name)
		if v.IsNull() || !v.IsKnown() {
			continue
		}
		switch a.Type {
		case sdk.TypeString:
			cfg.Values[a.Name] = v.AsString()
		case sdk.TypeNumber:
			f, _ := v.AsBigFloat().Float64()
			cfg.Values[a.Name] = f
		case sdk.TypeBool:
			cfg.Values[a.Name] = v.True()
		case sdk.TypeStringList:
			var list []string
			if err := gocty.FromCtyValue(v, &list); err != nil {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid list", Detail: err.Error(), Subject: attrs.exprRange(a.Name, blockRange).Ptr()})
				continue
			}
			if list == nil {
				list = []string{}
			}
			cfg.Values[a.Name] = list
		case sdk.TypeDuration:
			d, err := time.ParseDuration(v.AsString())
			if err != nil || d <= 0 {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid duration",
					Detail:   fmt.Sprintf("%s = %q is not a positive duration: write a number and a unit, such as \"5s\", \"250ms\" or \"1m30s\".", a.Name, v.AsString()),
					Subject:  attrs.exprRange(a.Name, blockRange).Ptr(),
				})
				continue
			}
			cfg.Values[a.Name] = d
		}
	}
	return cfg, diags
}

// ranges knows where each attribute of the config block is written.
type ranges map[string]*hcl.Attribute

func attributeRanges(body hcl.Body, schema sdk.Schema) ranges {
	bs := &hcl.BodySchema{}
	for _, a := range schema.Attributes {
		bs.Attributes = append(bs.Attributes, hcl.AttributeSchema{Name: a.Name})
	}
	content, _, _ := body.PartialContent(bs)
	if content == nil {
		return ranges{}
	}
	return ranges(content.Attributes)
}

func (r ranges) exprRange(name string, fallback hcl.Range) hcl.Range {
	if a, ok := r[name]; ok {
		return a.Expr.Range()
	}
	return fallback
}

var pathRe = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)(?:\[(\d+)\])?$`)

// pluginDiagnostics turns the plugin's Configure diagnostics into HCL
// diagnostics at the attribute (or list element) they name.
func pluginDiagnostics(source string, pds sdk.Diagnostics, attrs ranges, blockRange hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, d := range pds {
		subject := blockRange
		if m := pathRe.FindStringSubmatch(d.AttributePath); m != nil {
			if a, ok := attrs[m[1]]; ok {
				subject = a.Expr.Range()
				if m[2] != "" {
					if i, err := strconv.Atoi(m[2]); err == nil {
						if elems, diags := hcl.ExprList(a.Expr); !diags.HasErrors() && i < len(elems) {
							subject = elems[i].Range()
						}
					}
				}
			}
		}
		summary := d.Summary
		if summary == "" {
			summary = "Invalid configuration"
		}
		detail := d.Detail
		if detail == "" {
			detail = summary
		}
		if d.AttributePath != "" && subject == blockRange {
			detail = fmt.Sprintf("%s (about %s)", detail, d.AttributePath)
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  summary,
			Detail:   fmt.Sprintf("Source %q: %s", source, detail),
			Subject:  subject.Ptr(),
		})
	}
	return diags
}
