package config

// The control { partition { } } block: path-partition detection
// (docs/partition.md).

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// DefaultPartitionRounds is how many rounds in a row a voter group must be
// alone against the others before a path partition is suspected.
const DefaultPartitionRounds = 3

var partitionSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "label", Required: true}, {Name: "rounds"}},
}

// Partition is `control { partition { } }`: suspect a path partition when
// every voter of one group (a source and a value of the voter label Label)
// votes an origin down for Rounds rounds in a row while other voters vote
// it up. It only announces; it never switches.
type Partition struct {
	Label     string
	Rounds    int
	DeclRange hcl.Range
}

// partition reads `control { partition { } }`.
func (l *loader) partition(b *hcl.Block) {
	if prev := l.cfg.Control.Partition; prev != nil {
		l.add(b.DefRange, "Duplicate partition block",
			fmt.Sprintf("A partition block was already declared at %s; merge them.", prev.DeclRange))
		return
	}
	content, diags := b.Body.Content(partitionSchema)
	l.diags = append(l.diags, diags...)
	p := &Partition{Rounds: DefaultPartitionRounds, DeclRange: b.DefRange}
	l.nonEmpty(content.Attributes, "label", &p.Label)
	l.integer(content.Attributes, "rounds", 1, &p.Rounds)
	l.cfg.Control.Partition = p
}
