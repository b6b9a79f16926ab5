package config

import (
	"bytes"
	"fmt"
	"runtime"
	"sort"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// chunkedParseMin is the file size from which a file is parsed in chunks,
// in parallel: a fleet of 100,000 sites is a file of some 16 MB, which the
// HCL parser takes seconds to read in one piece.
const chunkedParseMin = 1 << 20

// chunkSize is the size a chunk aims at.
const chunkSize = 256 << 10

// parsedFile is one parsed configuration file: its top-level bodies (one,
// or one per chunk, in file order) and what diagnostics need of it.
type parsedFile struct {
	bodies []hcl.Body
	file   *hcl.File
	diags  hcl.Diagnostics
}

// parseFile parses one file. A large file is cut at top-level block
// boundaries and the pieces parsed concurrently; when any piece fails,
// the whole file is parsed again in one piece, so that every diagnostic is
// exactly the parser's own.
func parseFile(name string, src []byte) parsedFile {
	if len(src) >= chunkedParseMin {
		if pf, ok := parseChunked(name, src); ok {
			return pf
		}
	}
	f, diags := hclsyntax.ParseConfig(src, name, hcl.Pos{Line: 1, Column: 1})
	pf := parsedFile{file: f, diags: diags}
	if f != nil && f.Body != nil {
		pf.bodies = []hcl.Body{f.Body}
	}
	return pf
}

func parseChunked(name string, src []byte) (parsedFile, bool) {
	return parseChunkedAt(name, src, splitPoints(src, chunkSize))
}

func parseChunkedAt(name string, src []byte, starts []hcl.Pos) (parsedFile, bool) {
	if len(starts) < 2 {
		return parsedFile{}, false
	}
	bodies := make([]hcl.Body, len(starts))
	failed := make([]bool, len(starts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for k, at := range starts {
		end := len(src)
		if k+1 < len(starts) {
			end = starts[k+1].Byte
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			f, diags := hclsyntax.ParseConfig(src[at.Byte:end], name, at)
			if len(diags) > 0 || f == nil {
				failed[k] = true
				return
			}
			bodies[k] = f.Body
		})
	}
	wg.Wait()
	for _, bad := range failed {
		if bad {
			return parsedFile{}, false
		}
	}
	return parsedFile{bodies: bodies, file: &hcl.File{Bytes: src, Body: hcl.EmptyBody()}}, true
}

// splitPoints returns where chunks of about size bytes start: the file's
// start and then line starts at the top level (outside any block,
// bracket, string, heredoc or comment). The scan need not be perfect: a
// piece cut in a wrong place does not parse on its own, and the file is
// then parsed whole.
func splitPoints(src []byte, size int) []hcl.Pos {
	out := []hcl.Pos{{Line: 1, Column: 1, Byte: 0}}
	depth := 0
	line := 1
	next := size
	var heredoc []byte // the closing marker while inside a heredoc
	for i := 0; i < len(src); i++ {
		c := src[i]
		if heredoc != nil {
			if c == '\n' {
				line++
				rest := src[i+1:]
				lineEnd := bytes.IndexByte(rest, '\n')
				if lineEnd < 0 {
					lineEnd = len(rest)
				}
				if bytes.Equal(bytes.TrimSpace(rest[:lineEnd]), heredoc) {
					heredoc = nil
				}
			}
			continue
		}
		switch c {
		case '\n':
			line++
			if depth == 0 && i+1 >= next && i+1 < len(src) && isIdentStart(src[i+1]) {
				out = append(out, hcl.Pos{Line: line, Column: 1, Byte: i + 1})
				next = i + 1 + size
			}
		case '{', '[', '(':
			depth++
		case '}', ']', ')':
			depth--
		case '#':
			i = skipLine(src, i)
			i-- // leave the newline to the loop
		case '/':
			if i+1 < len(src) && src[i+1] == '/' {
				i = skipLine(src, i) - 1
			} else if i+1 < len(src) && src[i+1] == '*' {
				end := bytes.Index(src[i+2:], []byte("*/"))
				if end < 0 {
					return out[:1]
				}
				line += bytes.Count(src[i:i+2+end], []byte("\n"))
				i += 2 + end + 1
			}
		case '"':
			j, lines, ok := skipString(src, i)
			if !ok {
				return out[:1]
			}
			i, line = j, line+lines
		case '<':
			if i+1 < len(src) && src[i+1] == '<' {
				j := i + 2
				if j < len(src) && src[j] == '-' {
					j++
				}
				k := j
				for k < len(src) && (isIdentStart(src[k]) || src[k] >= '0' && src[k] <= '9' || src[k] == '-') {
					k++
				}
				if k > j && k < len(src) && (src[k] == '\n' || src[k] == '\r') {
					heredoc = src[j:k]
					i = k - 1
				}
			}
		}
	}
	return out
}

func skipLine(src []byte, i int) int {
	for i < len(src) && src[i] != '\n' {
		i++
	}
	return i
}

// skipString returns the index of the closing quote of the string that
// opens at i, and the newlines inside it (in interpolations).
func skipString(src []byte, i int) (end, lines int, ok bool) {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case '"':
			return j, lines, true
		case '\n':
			lines++
		case '$', '%':
			if j+1 < len(src) && src[j+1] == '{' {
				// An interpolation: skip to its closing brace, strings in it
				// included.
				depth := 0
				for k := j + 1; k < len(src); k++ {
					switch src[k] {
					case '{':
						depth++
					case '}':
						depth--
						if depth == 0 {
							j = k
							goto next
						}
					case '"':
						e, l, ok := skipString(src, k)
						if !ok {
							return 0, 0, false
						}
						k, lines = e, lines+l
					case '\n':
						lines++
					}
				}
				return 0, 0, false
			}
		}
	next:
	}
	return 0, 0, false
}

func isIdentStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

// topNav tells a diagnostic which top-level block holds it ("in site
// "www""), as HCL's own navigation does, without keeping the syntax tree.
type topNav struct {
	blocks []navBlock // by start offset
}

type navBlock struct {
	start, end int
	typ        string
	labels     []string
}

func newTopNav(bodies []hcl.Body) *topNav {
	n := &topNav{}
	for _, b := range bodies {
		if r, ok := b.(*reusedSite); ok {
			n.blocks = append(n.blocks, r.nav)
			continue
		}
		sb, ok := b.(*hclsyntax.Body)
		if !ok {
			continue
		}
		for _, blk := range sb.Blocks {
			r := blk.Range()
			n.blocks = append(n.blocks, navBlock{start: r.Start.Byte, end: r.End.Byte, typ: blk.Type, labels: blk.Labels})
		}
	}
	sort.Slice(n.blocks, func(i, j int) bool { return n.blocks[i].start < n.blocks[j].start })
	return n
}

// ContextString implements the navigation HCL's diagnostic writer asks for.
func (n *topNav) ContextString(offset int) string {
	i := sort.Search(len(n.blocks), func(i int) bool { return n.blocks[i].end > offset })
	if i == len(n.blocks) || n.blocks[i].start > offset {
		return ""
	}
	b := n.blocks[i]
	s := b.typ
	for _, l := range b.labels {
		s += fmt.Sprintf(" %q", l)
	}
	return s
}
