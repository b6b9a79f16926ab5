package config

import (
	"bytes"
	"crypto/sha256"
	"math"
	"runtime"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// A reload of a large configuration usually changes a few sites. Parsing
// the whole of it again costs seconds at 100,000 sites and, while the old
// configuration is still in force, a second copy of every site. So the
// loader remembers, for the files a configuration was loaded from, the
// text of each top-level block and the site it made (blockIndex), and a
// later load (reparse) parses only the blocks whose text is new; a site
// block whose text it has seen takes the site decoded then: the very
// value, shared with the configuration in force when the block did not
// move, or a copy with its file positions moved when it did.
//
// That is exactly a fresh load when:
//   - everything but the site blocks is unchanged, text for text (the
//     sources, the control block and the rest decide how a site is
//     decoded and checked), and so are the CA bundles the sites read;
//   - a site is taken again only from a block that declared that site
//     alone and whose decoding said nothing (no warning to repeat), with
//     no position outside its own block (a shared health check's);
//   - the checks that need the whole configuration (finish) run over
//     every site, taken again or not, and never change one taken again.
//
// Any other case, and any load that ends in an error (so that every
// diagnostic is the parser's own), parses everything.

// blockIndex describes the files a configuration was loaded from.
type blockIndex struct {
	// Context is the digest of the file names and of every top-level
	// block's text but the site blocks'.
	Context [sha256.Size]byte
	// Files are each file's site blocks, in file order.
	Files map[string][]blockSpan
}

// blockSpan is one site block of a file: from its first byte to the start
// of the next top-level block (its trailing comments included).
type blockSpan struct {
	Sum        [16]byte
	Line       int32
	Start, End int32
	// Site is the index in Config.Sites of the site the block declared
	// when it may be taken again; -1 when not.
	Site int32
	// DefaultHC: the site has no health_check block (it shares the
	// defaults' value).
	DefaultHC bool
}

// span is one top-level block of a file (and what follows it up to the
// next one).
type fileSpan struct {
	pos  hcl.Pos
	end  int
	site bool     // the text begins with the keyword site
	sum  [16]byte // the text's, for a site block
}

// spansOf cuts src at its top-level blocks.
func spansOf(src []byte) []fileSpan {
	pts := splitPoints(src, 1)
	out := make([]fileSpan, len(pts))
	for i, p := range pts {
		end := len(src)
		if i+1 < len(pts) {
			end = pts[i+1].Byte
		}
		out[i] = fileSpan{pos: p, end: end, site: isSiteBlock(src[p.Byte:end])}
		if out[i].site {
			out[i].sum = spanSum(src[p.Byte:end])
		}
	}
	return out
}

func isSiteBlock(text []byte) bool {
	rest, ok := bytes.CutPrefix(text, []byte("site"))
	return ok && len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t' || rest[0] == '"')
}

func spanSum(text []byte) (s [16]byte) {
	full := sha256.Sum256(text)
	copy(s[:], full[:16])
	return s
}

// contextSum digests the file names and the text of every block that is
// not a site block.
func contextSum(files []fileSource, spans [][]fileSpan) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	put := func(b []byte) {
		for i := range n {
			n[i] = byte(len(b) >> (8 * i))
		}
		h.Write(n[:])
		h.Write(b)
	}
	for i, f := range files {
		put([]byte(f.name))
		for _, sp := range spans[i] {
			if !sp.site {
				put(f.src[sp.pos.Byte:sp.end])
			}
		}
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// indexBlocks builds the index of cfg, loaded from files cut in spans.
// It is nil when a block other than a site's shares a site block's text:
// such files are always parsed whole.
func indexBlocks(files []fileSource, spans [][]fileSpan, cfg *Config, notes loadNotes) *blockIndex {
	idx := &blockIndex{Context: contextSum(files, spans), Files: make(map[string][]blockSpan, len(files))}
	byFile := map[string][]int{}
	for i, s := range cfg.Sites {
		byFile[s.DeclRange.Filename] = append(byFile[s.DeclRange.Filename], i)
	}
	for fi, f := range files {
		nav, _ := cfg.Files[f.name].Nav.(*topNav)
		if nav == nil || len(f.src) > math.MaxInt32 {
			return nil
		}
		sites := byFile[f.name]
		k, b := 0, 0 // the next site of the file, the next block
		var out []blockSpan
		for _, sp := range spans[fi] {
			if !sp.site {
				continue
			}
			// The blocks that start in the span: a site block's span
			// holds that block alone, or the files are parsed whole.
			for b < len(nav.blocks) && nav.blocks[b].start < sp.pos.Byte {
				b++
			}
			blocks := 0
			for j := b; j < len(nav.blocks) && nav.blocks[j].start < sp.end; j++ {
				if nav.blocks[j].typ != "site" {
					return nil
				}
				blocks++
			}
			for k < len(sites) && cfg.Sites[sites[k]].DeclRange.Start.Byte < sp.pos.Byte {
				k++
			}
			bs := blockSpan{Sum: sp.sum, Line: int32(sp.pos.Line), Start: int32(sp.pos.Byte), End: int32(sp.end), Site: -1}
			if blocks == 1 && k < len(sites) {
				if s := cfg.Sites[sites[k]]; s.DeclRange.Start.Byte == sp.pos.Byte && !notes.noisy[s] && ownRanges(s, f.name, sp.pos.Byte, sp.end) {
					bs.Site, bs.DefaultHC = int32(sites[k]), s.HealthCheck == notes.defaultHC
				}
			}
			out = append(out, bs)
		}
		idx.Files[f.name] = out
	}
	return idx
}

// ownRanges reports whether every position s holds lies in its own block.
func ownRanges(s *Site, file string, start, end int) bool {
	in := func(r hcl.Range) bool {
		return r == (hcl.Range{}) || r.Filename == file && r.Start.Byte >= start && r.End.Byte <= end
	}
	if !in(s.DeclRange) {
		return false
	}
	for _, o := range s.Origins {
		if !in(o.DeclRange) {
			return false
		}
	}
	hc := s.HealthCheck
	return hc == nil || in(hc.TimeoutRange) && in(hc.ConfirmRange)
}

// reusedSite is a site block taken again from the last load: a body the
// loader knows by its type and never reads.
type reusedSite struct {
	hcl.Body
	site *Site
	nav  navBlock
}

// reparse loads files using what prev, loaded from files described by
// idx, decoded: see the comment at the top of this file. ok is false when
// the files must be parsed whole.
func reparse(files []fileSource, prev *Config, idx *blockIndex) (cfg *Config, diags hcl.Diagnostics, next *blockIndex, reused int, ok bool) {
	if prev == nil || idx == nil {
		return nil, nil, nil, 0, false
	}
	spans := make([][]fileSpan, len(files))
	for i, f := range files {
		spans[i] = spansOf(f.src)
	}
	if contextSum(files, spans) != idx.Context {
		return nil, nil, nil, 0, false
	}
	parsed := make([]parsedFile, len(files))
	type piece struct {
		file, at int // the file, the piece's place in parsed[file].bodies
		span     int // the piece's first span
		pos      hcl.Pos
		end      int
	}
	var pieces []piece
	for fi, f := range files {
		old := map[[16]byte]blockSpan{}
		for _, bs := range idx.Files[f.name] {
			if bs.Site >= 0 && int(bs.Site) < len(prev.Sites) {
				old[bs.Sum] = bs
			}
		}
		var oldNav *topNav
		if pf := prev.Files[f.name]; pf != nil {
			oldNav, _ = pf.Nav.(*topNav)
		}
		var bodies []hcl.Body
		open := -1 // the piece to parse that the next new block joins
		for si, sp := range spans[fi] {
			if sp.site {
				if bs, found := old[sp.sum]; found && oldNav != nil {
					delete(old, bs.Sum) // one site per block
					s := moved(prev.Sites[bs.Site], bs, sp)
					nb, navOK := oldNav.at(int(bs.Start))
					if navOK {
						nb.start += sp.pos.Byte - int(bs.Start)
						nb.end += sp.pos.Byte - int(bs.Start)
						bodies = append(bodies, &reusedSite{site: s, nav: nb})
						open = -1
						reused++
						continue
					}
				}
			}
			if open >= 0 && pieces[open].end-pieces[open].pos.Byte < chunkSize {
				pieces[open].end = sp.end
				continue
			}
			// Pieces of about chunkSize at most, parsed concurrently.
			open = len(pieces)
			pieces = append(pieces, piece{file: fi, at: len(bodies), span: si, pos: sp.pos, end: sp.end})
			bodies = append(bodies, nil)
		}
		parsed[fi] = parsedFile{bodies: bodies, file: &hcl.File{Bytes: f.src, Body: hcl.EmptyBody()}}
	}
	if reused == 0 {
		return nil, nil, nil, 0, false
	}
	// The sites without a health_check block share one value, the one
	// the sites taken again hold.
	var defaultHC *HealthCheck
	for _, list := range idx.Files {
		for _, bs := range list {
			if bs.DefaultHC && bs.Site >= 0 && int(bs.Site) < len(prev.Sites) {
				defaultHC = prev.Sites[bs.Site].HealthCheck
				break
			}
		}
		if defaultHC != nil {
			break
		}
	}
	failed := make([]bool, len(pieces))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for k, p := range pieces {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			src := files[p.file].src
			f, d := hclsyntax.ParseConfig(src[p.pos.Byte:p.end], files[p.file].name, p.pos)
			if len(d) > 0 || f == nil {
				failed[k] = true
				return
			}
			parsed[p.file].bodies[p.at] = f.Body
		})
	}
	wg.Wait()
	for k, p := range pieces {
		if failed[k] || !sitesAlone(parsed[p.file].bodies[p.at], spans[p.file][p.span:], p.pos.Byte, p.end) {
			return nil, nil, nil, 0, false
		}
	}
	cfg, diags, notes := assemble(files, parsed, defaultHC)
	if diags.HasErrors() {
		return nil, nil, nil, 0, false // parsed whole, every diagnostic is the parser's own
	}
	return cfg, diags, indexBlocks(files, spans, cfg, notes), reused, true
}

// sitesAlone reports whether, in a piece parsed again, every block other
// than a site's lies in a span of its own, as in the index. spans start
// with the piece's first.
func sitesAlone(body hcl.Body, spans []fileSpan, start, end int) bool {
	sb, ok := body.(*hclsyntax.Body)
	if !ok {
		return false
	}
	i := 0
	for _, blk := range sb.Blocks {
		at := blk.Range().Start.Byte
		for i < len(spans) && spans[i].end <= at {
			i++
		}
		if i == len(spans) || at < start || at >= end {
			return false
		}
		if blk.Type != "site" && spans[i].site {
			return false
		}
	}
	return true
}

// at finds the block that starts at offset start.
func (n *topNav) at(start int) (navBlock, bool) {
	lo, hi := 0, len(n.blocks)
	for lo < hi {
		m := (lo + hi) / 2
		if n.blocks[m].start < start {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(n.blocks) && n.blocks[lo].start == start {
		return n.blocks[lo], true
	}
	return navBlock{}, false
}

// moved is s, declared by the block of old, as declared by the same text
// at sp: s itself when the block did not move, or a copy whose positions
// moved with it (the lines and bytes; a block starts a line, so the
// columns stay).
func moved(s *Site, old blockSpan, sp fileSpan) *Site {
	dLine, dByte := sp.pos.Line-int(old.Line), sp.pos.Byte-int(old.Start)
	if dLine == 0 && dByte == 0 {
		return s
	}
	shift := func(r hcl.Range) hcl.Range {
		if r == (hcl.Range{}) {
			return r
		}
		r.Start.Line += dLine
		r.End.Line += dLine
		r.Start.Byte += dByte
		r.End.Byte += dByte
		return r
	}
	c := *s
	c.DeclRange = shift(s.DeclRange)
	c.Origins = make([]*Origin, len(s.Origins))
	for i, o := range s.Origins {
		oc := *o
		oc.DeclRange = shift(o.DeclRange)
		c.Origins[i] = &oc
	}
	if hc := s.HealthCheck; hc != nil && (hc.TimeoutRange != hcl.Range{} || hc.ConfirmRange != hcl.Range{}) {
		hcc := *hc
		hcc.TimeoutRange, hcc.ConfirmRange = shift(hc.TimeoutRange), shift(hc.ConfirmRange)
		c.HealthCheck = &hcc
	}
	return &c
}
