package config

// The source blocks: the vote chain.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/vigilcdn/vigil/core/vote"
)

var sourceSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "plugin", Required: true}, {Name: "min_votes"}, {Name: "tally"}, {Name: "timeout"},
		{Name: "checksum"}, {Name: "env"}, {Name: "auto_mtls"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "config"}},
}

func (l *loader) source(b *hcl.Block) {
	name := b.Labels[0]
	if prev, ok := l.sourceAt[name]; ok {
		l.add(b.DefRange, "Duplicate source name",
			fmt.Sprintf("A source named %q was already declared at %s. Source names must be unique: rename or remove one of them.", name, prev))
		return
	}
	l.sourceAt[name] = b.DefRange
	content, diags := b.Body.Content(sourceSchema)
	l.diags = append(l.diags, diags...)
	s := &Source{Name: name, MinVotes: 1, Tally: vote.TallyOwn, DeclRange: b.DefRange}
	l.nonEmpty(content.Attributes, "plugin", &s.Plugin)
	if strings.Contains(s.Plugin, "/") {
		// A path, not a name looked up in plugin_dir.
		s.Plugin = fromFile(content.Attributes["plugin"], s.Plugin)
	}
	l.integer(content.Attributes, "min_votes", 1, &s.MinVotes)
	if attr := content.Attributes["tally"]; attr != nil {
		var t string
		if l.decode(attr, &t) {
			if v, err := vote.ParseTally(t); err != nil {
				l.add(attr.Expr.Range(), "Invalid tally",
					fmt.Sprintf("tally must be \"own\" (judge on this source's votes alone) or \"carry\" (judge on every vote cast so far this round); got %q.", t))
			} else {
				s.Tally = v
			}
		}
	}
	if attr := content.Attributes["timeout"]; attr != nil {
		s.TimeoutSet, s.TimeoutRange = true, attr.Expr.Range()
		l.duration(content.Attributes, "timeout", &s.Timeout)
	}
	if attr := content.Attributes["checksum"]; attr != nil {
		var c string
		if l.decode(attr, &c) {
			if !validChecksum(c) {
				l.add(attr.Expr.Range(), "Invalid checksum",
					"checksum must be \"sha256:\" followed by 64 hexadecimal digits, as printed by `sha256sum PLUGIN`.")
			} else {
				s.Checksum = c
			}
		}
	}
	l.strList(content.Attributes, "env", &s.Env)
	if attr := content.Attributes["auto_mtls"]; attr != nil {
		on := true
		if l.decode(attr, &on) && !on {
			s.PlaintextTransport = true
			l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Plugin connection without TLS",
				Detail:  fmt.Sprintf("Source %q: auto_mtls = false makes vigil talk to the plugin over its socket in plaintext, without the mutual TLS go-plugin sets up for each start. Use it only for a plugin that cannot do AutoMTLS (see sdk/PROTOCOL.md), and keep the machine's other users away from the plugin's socket.", name),
				Subject: attr.Expr.Range().Ptr()})
		}
	}
	for _, cb := range content.Blocks {
		if s.Config != nil {
			l.add(cb.DefRange, "Duplicate config block", "A source has at most one config block; merge them.")
			continue
		}
		s.Config = cb.Body
		s.ConfigText = blockText(l.cfg.Files, cb.Body)
	}
	l.cfg.Sources = append(l.cfg.Sources, s)
}

func validChecksum(c string) bool {
	_, err := ParseChecksum(c)
	return err == nil
}

// ParseChecksum reads a source's checksum, "sha256:" and the 64
// hexadecimal digits sha256sum prints, into the digest's bytes. The loader
// and the plugin host both read checksums with it.
func ParseChecksum(s string) ([]byte, error) {
	hexSum, ok := strings.CutPrefix(s, "sha256:")
	sum, err := hex.DecodeString(hexSum)
	if !ok || err != nil || len(sum) != sha256.Size {
		return nil, fmt.Errorf("checksum %q: want \"sha256:\" and 64 hex digits (sha256sum prints them)", s)
	}
	return sum, nil
}
