package pluginhost

import (
	"errors"
	"os"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// errChecksum marks a launch refused because the binary's checksum is not
// the configured one: its diagnostic points at the `checksum` attribute.
var errChecksum = errors.New("checksum mismatch")

// launchDiag is Start's diagnostic for a launch that failed: at the
// source block's `checksum` attribute when the checksum did not match,
// at Spec.Range otherwise.
func (s *Source) launchDiag(err error) hcl.Diagnostics {
	diags := s.diag("Cannot start vote-source plugin", err.Error())
	if errors.Is(err, errChecksum) {
		diags[0].Summary = "Plugin binary does not match its checksum"
		if r := attrOfBlock(s.spec.Range, "checksum"); r.Filename != "" {
			diags[0].Subject = r.Ptr()
		}
	}
	return diags
}

// attrOfBlock finds the attribute name of the block declared at decl (a
// block's DefRange, as config keeps it) by reading decl's file again. A
// zero range means it is not found (the file changed, or decl is not a
// block's header).
func attrOfBlock(decl hcl.Range, name string) hcl.Range {
	if decl.Filename == "" {
		return hcl.Range{}
	}
	src, err := os.ReadFile(decl.Filename)
	if err != nil {
		return hcl.Range{}
	}
	f, diags := hclsyntax.ParseConfig(src, decl.Filename, hcl.InitialPos)
	if diags.HasErrors() {
		return hcl.Range{}
	}
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok {
		return hcl.Range{}
	}
	for _, blk := range body.Blocks {
		if blk.DefRange().Start.Byte == decl.Start.Byte || blk.TypeRange.Start.Byte == decl.Start.Byte {
			if a, ok := blk.Body.Attributes[name]; ok {
				return a.SrcRange
			}
			return hcl.Range{}
		}
	}
	return hcl.Range{}
}
