package config

import (
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// The rule for relative paths, the same for every attribute that names a
// file or a folder (data_dir, plugin_dir, a source's plugin path, the
// token files, url_file, ca_file and the TLS files): a relative path is
// taken from the folder of the file that names it, never from the agent's
// working directory. The defaults of data_dir and plugin_dir, which no
// file names, stay relative to the working directory.

// fromFile resolves p, the value of attr, against the folder of the file
// that holds attr; an absolute or empty p is returned as it is.
func fromFile(attr *hcl.Attribute, p string) string {
	if p == "" || filepath.IsAbs(p) || attr == nil {
		return p
	}
	return filepath.Join(filepath.Dir(attr.Expr.Range().Filename), p)
}

// pathAttr reads the path attribute name (not empty) into into, resolved
// with fromFile.
func (l *loader) pathAttr(attrs hcl.Attributes, name string, into *string) {
	attr := attrs[name]
	if attr == nil {
		return
	}
	var s string
	l.nonEmpty(attrs, name, &s)
	if s != "" {
		*into = fromFile(attr, s)
	}
}

// optionalPathAttr is str for a path: empty is left empty.
func (l *loader) optionalPathAttr(attrs hcl.Attributes, name string, into *string) {
	attr := attrs[name]
	if attr == nil {
		return
	}
	var s string
	l.str(attrs, name, &s)
	if strings.TrimSpace(s) != "" {
		s = fromFile(attr, s)
	}
	*into = s
}
