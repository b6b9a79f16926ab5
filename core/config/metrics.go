package config

// The control { metrics { } } block: what the agent's /metrics shows.

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// DefaultProbeSeriesSites is the largest fleet for which /metrics has the
// per-vote series (vigil_probe_*) when the configuration says nothing.
const DefaultProbeSeriesSites = 1000

var metricsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "probe_series_sites"}},
}

// metrics reads `control { metrics { } }`.
func (l *loader) metrics(b *hcl.Block) {
	if l.metricsAt != nil {
		l.add(b.DefRange, "Duplicate metrics block",
			fmt.Sprintf("A metrics block was already declared at %s; merge them.", *l.metricsAt))
		return
	}
	at := b.DefRange
	l.metricsAt = &at
	content, diags := b.Body.Content(metricsSchema)
	l.diags = append(l.diags, diags...)
	if attr := content.Attributes["probe_series_sites"]; attr != nil {
		var n int
		if l.decode(attr, &n) {
			if n < 0 {
				l.add(attr.Expr.Range(), "Invalid probe_series_sites",
					fmt.Sprintf("probe_series_sites must be 0 (no per-vote series) or more; got %d.", n))
				return
			}
			l.cfg.Control.ProbeSeriesSites = &n
		}
	}
}

// ProbeSeries is the largest fleet for which /metrics has the per-vote
// series: control { metrics { probe_series_sites } }, or
// DefaultProbeSeriesSites.
func (c *Control) ProbeSeries() int {
	if c.ProbeSeriesSites != nil {
		return *c.ProbeSeriesSites
	}
	return DefaultProbeSeriesSites
}
