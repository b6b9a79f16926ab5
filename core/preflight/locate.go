package preflight

import (
	"sort"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// locator finds where an attribute is written. The loaded configuration
// keeps the ranges of few attributes (a source's timeout, a block's
// header), and its files' text but not their syntax trees: a file is
// parsed again, once, only when a diagnostic needs a range in it, so a
// configuration that passes costs no second parse.
type locator struct {
	files map[string]*hcl.File

	mu     sync.Mutex
	bodies map[string]*hclsyntax.Body // nil when the file cannot be parsed
}

func newLocator(files map[string]*hcl.File) *locator {
	return &locator{files: files, bodies: map[string]*hclsyntax.Body{}}
}

// body returns the parsed top-level body of the file, or nil.
func (l *locator) body(filename string) *hclsyntax.Body {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.bodies[filename]; ok {
		return b
	}
	var body *hclsyntax.Body
	if f := l.files[filename]; f != nil && len(f.Bytes) > 0 {
		parsed, diags := hclsyntax.ParseConfig(f.Bytes, filename, hcl.InitialPos)
		if !diags.HasErrors() && parsed != nil {
			body, _ = parsed.Body.(*hclsyntax.Body)
		}
	}
	l.bodies[filename] = body
	return body
}

// block returns the top-level block whose header is at decl.
func (l *locator) block(decl hcl.Range) *hclsyntax.Block {
	b := l.body(decl.Filename)
	if b == nil {
		return nil
	}
	for _, blk := range b.Blocks {
		if blk.DefRange().Start.Byte == decl.Start.Byte {
			return blk
		}
	}
	return nil
}

// attr returns the range of the value of the attribute reached by path
// (nested block types, then the attribute's name) in the top-level block
// declared at decl; the zero range when it is not written.
func (l *locator) attr(decl hcl.Range, path ...string) hcl.Range {
	blk := l.block(decl)
	if blk == nil {
		return hcl.Range{}
	}
	return attrIn(blk.Body, path)
}

// controlAttr is attr for the control block, wherever it is written.
func (l *locator) controlAttr(path ...string) hcl.Range {
	names := make([]string, 0, len(l.files))
	for name := range l.files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b := l.body(name)
		if b == nil {
			continue
		}
		for _, blk := range b.Blocks {
			if blk.Type == "control" {
				return attrIn(blk.Body, path)
			}
		}
	}
	return hcl.Range{}
}

func attrIn(body *hclsyntax.Body, path []string) hcl.Range {
	for len(path) > 1 {
		var next *hclsyntax.Body
		for _, blk := range body.Blocks {
			if blk.Type == path[0] {
				next = blk.Body
				break
			}
		}
		if next == nil {
			return hcl.Range{}
		}
		body, path = next, path[1:]
	}
	if a, ok := body.Attributes[path[0]]; ok {
		return a.Expr.Range()
	}
	return hcl.Range{}
}

// or returns r, or else fallback when r is the zero range.
func or(r, fallback hcl.Range) hcl.Range {
	if r.Filename == "" {
		return fallback
	}
	return r
}

// ptr returns a subject for a diagnostic: nil for the zero range (a
// default that is written nowhere).
func ptr(r hcl.Range) *hcl.Range {
	if r.Filename == "" {
		return nil
	}
	return r.Ptr()
}
