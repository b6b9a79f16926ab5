package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// blocksOf lists the top-level blocks of bodies with their labels and
// ranges, to compare a chunked parse with a whole one.
func blocksOf(bodies []hcl.Body) []string {
	var out []string
	for _, b := range bodies {
		for _, blk := range b.(*hclsyntax.Body).Blocks {
			out = append(out, fmt.Sprintf("%s %q %v attrs=%d", blk.Type, blk.Labels, blk.Range(), len(blk.Body.Attributes)))
		}
	}
	return out
}

func bigConfig(sites int, extra string) string {
	var b strings.Builder
	b.WriteString("source \"direct\" { plugin = \"vigil-source-direct\" }\n")
	for i := 0; i < sites; i++ {
		fmt.Fprintf(&b, `# site %d
site "s%06d" {
  hostname = "s%06d.example.com"
  health_check { path = "/h?x=${"}"}" }
  origin "a" { address = "http://127.0.0.1:1" }
  origin "b" { address = "http://127.0.0.1:2" }
  /* a { comment */
%s}
`, i, i, i, extra)
	}
	return b.String()
}

// TestChunkedParseMatchesWholeParse parses a large file in chunks and in
// one piece and compares every top-level block, range included.
func TestChunkedParseMatchesWholeParse(t *testing.T) {
	src := []byte(bigConfig(8000, "  x = <<EOT\n}\nsite \"fake\" {\nEOT\n"))
	if len(src) < chunkedParseMin {
		t.Fatalf("test config is %d bytes, below the chunked threshold", len(src))
	}
	if n := len(splitPoints(src, chunkSize)); n < 4 {
		t.Fatalf("%d chunks for %d bytes; want several", n, len(src))
	}
	chunked, ok := parseChunked("big.hcl", src)
	if !ok {
		t.Fatal("chunked parse failed on a valid file")
	}
	whole, diags := hclsyntax.ParseConfig(src, "big.hcl", hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	got, want := blocksOf(chunked.bodies), blocksOf([]hcl.Body{whole.Body})
	if !reflect.DeepEqual(got, want) {
		for i := range want {
			if i >= len(got) || got[i] != want[i] {
				t.Fatalf("block %d differs:\n got  %v\n want %s", i, got[i:min(i+1, len(got))], want[i])
			}
		}
		t.Fatalf("%d blocks, want %d", len(got), len(want))
	}
}

// TestChunkedParseErrorIsTheWholeParsersError: an error far into a large
// file is reported exactly as the parser reports it on the whole file.
func TestChunkedParseErrorIsTheWholeParsersError(t *testing.T) {
	src := bigConfig(8000, "")
	src = strings.Replace(src, `site "s007000" {`, `site "s007000" {{`, 1)
	_, diags := Parse("big.hcl", []byte(src))
	if !diags.HasErrors() {
		t.Fatal("no error for a broken block")
	}
	_, whole := hclsyntax.ParseConfig([]byte(src), "big.hcl", hcl.Pos{Line: 1, Column: 1})
	if diags.Error() != whole.Error() {
		t.Fatalf("chunked load says %q; the parser says %q", diags.Error(), whole.Error())
	}
}

// FuzzChunkedParse checks the one promise of the chunked parser: it either
// gives up, or finds exactly the blocks a whole parse finds.
func FuzzChunkedParse(f *testing.F) {
	f.Add("a {\n}\nb \"x\" {\n  y = \"}\"\n}\nc {}\n")
	f.Add("a = <<EOT\n}\nb {\nEOT\nb {}\n")
	f.Add("/* {\n*/ a {}\n# {\nb {}\n// }\nc {}\n")
	f.Add("a { x = \"${ \"}\" }\" }\nb {}\n")
	f.Fuzz(func(t *testing.T, src string) {
		whole, diags := hclsyntax.ParseConfig([]byte(src), "f.hcl", hcl.Pos{Line: 1, Column: 1})
		if diags.HasErrors() {
			return
		}
		starts := splitPoints([]byte(src), 1)
		pf, ok := parseChunkedAt("f.hcl", []byte(src), starts)
		if !ok {
			return
		}
		if got, want := blocksOf(pf.bodies), blocksOf([]hcl.Body{whole.Body}); !reflect.DeepEqual(got, want) {
			t.Fatalf("chunks at %v:\n got  %v\n want %v", starts, got, want)
		}
	})
}
