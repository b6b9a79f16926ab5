package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/vigilcdn/vigil/core/config"
)

func init() {
	register(command{
		name: "fmt", synopsis: "rewrite configuration files in the canonical HCL style (-check: only report)",
		usage: "vigil fmt [-check] [FILE|FOLDER ...]",
		help: `Formats the *.hcl files given, or those of the folders given (the current
folder by default), in place. A file with a syntax error is left alone and
reported with file:line:col. With -check, exit 3 when a file needs formatting.`,
		run: runFmt,
	})
}

// runFmt formats .hcl files in place, like terraform fmt: the files or
// folders given (the current folder by default). A file with a syntax error
// is left alone and reported with file:line:col.
func runFmt(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("fmt")
	check := fs.Bool("check", false, "change nothing; list the files that need formatting and exit 3 if any")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		pos = []string{"."}
	}
	var files []string
	for _, p := range pos {
		info, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(stderr, "vigil fmt: %v\n", err)
			return 1
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		matches, _ := filepath.Glob(filepath.Join(p, "*.hcl"))
		files = append(files, matches...)
	}
	sort.Strings(files)
	code = 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(stderr, "vigil fmt: %v\n", err)
			code = 1
			continue
		}
		if _, diags := hclsyntax.ParseConfig(src, f, hcl.InitialPos); diags.HasErrors() {
			_ = config.WriteDiagnostics(stderr, map[string]*hcl.File{f: {Bytes: src}}, diags)
			code = 1
			continue
		}
		out := hclwrite.Format(src)
		if bytes.Equal(out, src) {
			continue
		}
		fmt.Fprintln(stdout, f)
		if *check {
			if code == 0 {
				code = 3
			}
			continue
		}
		info, _ := os.Stat(f)
		if err := os.WriteFile(f, out, info.Mode().Perm()); err != nil {
			fmt.Fprintf(stderr, "vigil fmt: %v\n", err)
			code = 1
		}
	}
	return code
}
