package config

// The control { history { } } block: the verdict history kept in
// data_dir/history.ring (docs/history.md).

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// DefaultHistoryRounds is how many verdicts the history keeps per origin
// when the configuration says nothing; MaxHistoryRounds is the most it
// keeps (as core/history's DefaultRounds and MaxRounds).
const (
	DefaultHistoryRounds = 60
	MaxHistoryRounds     = 1024
)

var historySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "rounds"}},
}

// history reads `control { history { } }`.
func (l *loader) history(b *hcl.Block) {
	if l.historyAt != nil {
		l.add(b.DefRange, "Duplicate history block",
			fmt.Sprintf("A history block was already declared at %s; merge them.", *l.historyAt))
		return
	}
	at := b.DefRange
	l.historyAt = &at
	content, diags := b.Body.Content(historySchema)
	l.diags = append(l.diags, diags...)
	if attr := content.Attributes["rounds"]; attr != nil {
		var n int
		if l.decode(attr, &n) {
			if n < 1 || n > MaxHistoryRounds {
				l.add(attr.Expr.Range(), "Invalid history rounds",
					fmt.Sprintf("rounds must be from 1 to %d; got %d.", MaxHistoryRounds, n))
				return
			}
			l.cfg.Control.HistoryRounds = n
		}
	}
}
