package config

import (
	"io"
	"os"

	"github.com/hashicorp/hcl/v2"
	"github.com/mattn/go-isatty"
	"golang.org/x/term"
)

// WriteDiagnostics prints diagnostics with HCL's text writer: a source
// snippet under each, colour only when w is a terminal.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) error {
	width, color := uint(0), false
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		color = true
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			width = uint(cols)
		}
	}
	return hcl.NewDiagnosticTextWriter(w, files, width, color).WriteDiagnostics(diags)
}
