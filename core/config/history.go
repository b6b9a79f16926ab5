package config

// The control { history { } } block: the verdict history kept in
// data_dir/history.ring (docs/history.md).

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// DefaultHistoryKeep is how long the history keeps when the configuration
// says nothing: DefaultHistoryRounds rounds at the default round_interval.
// MaxHistoryRounds is the most rounds it keeps (as core/history's
// DefaultRounds and MaxRounds).
const (
	DefaultHistoryKeep   = 24 * time.Hour
	DefaultHistoryRounds = 2880
	MaxHistoryRounds     = 1 << 20
)

var historySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "rounds"}, {Name: "keep"}},
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
	if attr := content.Attributes["keep"]; attr != nil {
		if r := content.Attributes["rounds"]; r != nil {
			l.add(attr.Expr.Range(), "Both history keep and rounds",
				fmt.Sprintf("Set keep (a time) or rounds (a count), not both; rounds is set at %s:%d:%d. Remove one.", r.Expr.Range().Filename, r.Expr.Range().Start.Line, r.Expr.Range().Start.Column))
			return
		}
		var keep time.Duration
		l.duration(content.Attributes, "keep", &keep)
		if keep <= 0 {
			return
		}
		l.historyKeep(attr, keep)
	}
}

// historyDefault sizes the history of a configuration that does not:
// DefaultHistoryKeep.
func (l *loader) historyDefault() {
	c := &l.cfg.Control
	if c.HistoryRounds > 0 {
		return
	}
	interval := c.RoundInterval
	if interval <= 0 {
		interval = DefaultRoundInterval
	}
	c.HistoryKeep = DefaultHistoryKeep
	c.HistoryRounds = int(min((DefaultHistoryKeep+interval-1)/interval, MaxHistoryRounds))
}

// historyKeep sizes the history by time: keep / round_interval rounds,
// rounded up, at most MaxHistoryRounds (a warning says what a keep longer
// than that really keeps).
func (l *loader) historyKeep(attr *hcl.Attribute, keep time.Duration) {
	c := &l.cfg.Control
	interval := c.RoundInterval
	if interval <= 0 {
		interval = DefaultRoundInterval
	}
	if keep < interval {
		l.add(attr.Expr.Range(), "Invalid history keep",
			fmt.Sprintf("keep must be at least one round_interval (%s); got %s. Write a longer time, such as \"24h\".", interval, keep))
		return
	}
	rounds := int((keep + interval - 1) / interval)
	if rounds > MaxHistoryRounds {
		l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Subject: attr.Expr.Range().Ptr(),
			Summary: "History keep capped",
			Detail: fmt.Sprintf("keep = %s needs %d rounds at round_interval %s, and the history keeps at most %d rounds: it keeps %s. Shorten keep, or lengthen round_interval.",
				keep, rounds, interval, MaxHistoryRounds, time.Duration(MaxHistoryRounds)*interval)})
		rounds = MaxHistoryRounds
	}
	c.HistoryKeep, c.HistoryRounds = keep, rounds
}
