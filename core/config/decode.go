package config

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
)

// decoder collects diagnostics while reading attribute values.
type decoder struct {
	diags hcl.Diagnostics
}

func (d *decoder) add(subject hcl.Range, summary, detail string) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   detail,
		Subject:  subject.Ptr(),
	})
}

func (d *decoder) decode(attr *hcl.Attribute, target any) bool {
	if attr == nil {
		return false
	}
	diags := gohcl.DecodeExpression(attr.Expr, nil, target)
	d.diags = append(d.diags, diags...)
	return !diags.HasErrors()
}

func (d *decoder) str(attrs hcl.Attributes, name string, into *string) {
	d.decode(attrs[name], into)
}

func (d *decoder) boolean(attrs hcl.Attributes, name string, into *bool) {
	d.decode(attrs[name], into)
}

func (d *decoder) strList(attrs hcl.Attributes, name string, into *[]string) {
	d.decode(attrs[name], into)
}

// integer reads a whole number and checks it is >= min.
func (d *decoder) integer(attrs hcl.Attributes, name string, min int, into *int) {
	attr := attrs[name]
	var v int
	if !d.decode(attr, &v) {
		return
	}
	if v < min {
		d.add(attr.Expr.Range(), fmt.Sprintf("Invalid %s", name),
			fmt.Sprintf("%s must be at least %d; got %d.", name, min, v))
		return
	}
	*into = v
}

// duration reads a Go duration string ("30s", "1m30s") that is > 0.
func (d *decoder) duration(attrs hcl.Attributes, name string, into *time.Duration) {
	attr := attrs[name]
	var s string
	if !d.decode(attr, &s) {
		return
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.add(attr.Expr.Range(), fmt.Sprintf("Invalid duration for %s", name),
			fmt.Sprintf("%q is not a duration. Write a number with a unit, such as \"30s\", \"5s\" or \"1m30s\".", s))
		return
	}
	if v <= 0 {
		d.add(attr.Expr.Range(), fmt.Sprintf("Invalid duration for %s", name),
			fmt.Sprintf("%s must be greater than zero; got %q.", name, s))
		return
	}
	*into = v
}
