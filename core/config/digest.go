package config

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// ConfigDigest fingerprints what the source's `config { }` block means,
// not how it is written: comments, spacing, the order of attributes and
// the spelling of equal values ("5s" twice, 1.0 and 1) do not change it.
// A reload restarts a plugin only when its digest (or another setting of
// the source) changes. A block that does not parse or evaluate as plain
// values digests as its text, so that any edit of it counts as a change.
func (s *Source) ConfigDigest() string {
	h := sha256.New()
	f, diags := hclsyntax.ParseConfig([]byte(s.ConfigText), "config.hcl", hcl.InitialPos)
	if diags.HasErrors() || !digestBody(h, f.Body.(*hclsyntax.Body)) {
		h.Reset()
		h.Write([]byte("text\x00" + s.ConfigText))
	}
	return hex.EncodeToString(h.Sum(nil))
}

type hashWriter interface{ Write([]byte) (int, error) }

// digestBody writes body's attributes (by name, as JSON values) and its
// blocks (in order, since order may matter to a plugin) to h; false when
// some value is not a plain value.
func digestBody(h hashWriter, body *hclsyntax.Body) bool {
	names := make([]string, 0, len(body.Attributes))
	for n := range body.Attributes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v, diags := body.Attributes[n].Expr.Value(nil)
		if diags.HasErrors() {
			return false
		}
		b, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			return false
		}
		ty, err := ctyjson.MarshalType(v.Type())
		if err != nil {
			return false
		}
		h.Write([]byte("a\x00" + n + "\x00"))
		h.Write(ty)
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	for _, b := range body.Blocks {
		h.Write([]byte("b\x00" + b.Type + "\x00"))
		for _, l := range b.Labels {
			h.Write([]byte(l + "\x00"))
		}
		if !digestBody(h, b.Body) {
			return false
		}
		h.Write([]byte("end\x00"))
	}
	return true
}
