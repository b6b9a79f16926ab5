package config

// The control block: the round, the data directory, the plugins, the API.

import (
	"fmt"
	"strconv"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

var controlSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "round_interval"}, {Name: "sites_per_round"}, {Name: "data_dir"}, {Name: "plugin_dir"},
		{Name: "confirm_budget"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "api"}, {Type: "store", LabelNames: []string{"kind"}}, {Type: "partition"}, {Type: "history"}, {Type: "metrics"}},
}

var apiSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "listen"}, {Name: "token_env"}, {Name: "token_file"}, {Name: "read_access"},
		{Name: "read_token_env"}, {Name: "read_token_file"}, {Name: "node_token_env"}, {Name: "node_token_file"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "tls"}},
}

func (l *loader) control(b *hcl.Block) {
	content, diags := b.Body.Content(controlSchema)
	l.diags = append(l.diags, diags...)
	c := &l.cfg.Control
	l.duration(content.Attributes, "round_interval", &c.RoundInterval)
	l.sitesPerRound(content.Attributes, c)
	if attr := content.Attributes["confirm_budget"]; attr != nil {
		var pct int
		if l.decode(attr, &pct) {
			if pct < 1 || pct > 100 {
				l.add(attr.Expr.Range(), "Invalid confirm_budget",
					fmt.Sprintf("confirm_budget is the per cent of sites_per_round that one confirmation round may probe, from 1 to 100 (default %d); got %d.", DefaultConfirmBudget, pct))
			} else {
				c.ConfirmBudget = pct
			}
		}
	}
	l.pathAttr(content.Attributes, "data_dir", &c.DataDir)
	l.pathAttr(content.Attributes, "plugin_dir", &c.PluginDir)
	for _, ab := range content.Blocks {
		if ab.Type == "store" {
			l.store(ab)
			continue
		}
		if ab.Type == "partition" {
			l.partition(ab)
			continue
		}
		if ab.Type == "history" {
			l.history(ab)
			continue
		}
		if ab.Type == "metrics" {
			l.metrics(ab)
			continue
		}
		ac, diags := ab.Body.Content(apiSchema)
		l.diags = append(l.diags, diags...)
		l.nonEmpty(ac.Attributes, "listen", &c.API.Listen)
		l.str(ac.Attributes, "token_env", &c.API.TokenEnv)
		l.optionalPathAttr(ac.Attributes, "token_file", &c.API.TokenFile)
		l.str(ac.Attributes, "read_token_env", &c.API.ReadTokenEnv)
		l.optionalPathAttr(ac.Attributes, "read_token_file", &c.API.ReadTokenFile)
		l.str(ac.Attributes, "node_token_env", &c.API.NodeTokenEnv)
		l.optionalPathAttr(ac.Attributes, "node_token_file", &c.API.NodeTokenFile)
		for _, tb := range ac.Blocks {
			l.apiTLS(tb, &c.API)
		}
		if attr := ac.Attributes["read_access"]; attr != nil {
			var s string
			if l.decode(attr, &s) {
				if s != "open" && s != "token" {
					l.add(attr.Expr.Range(), "Invalid read_access",
						fmt.Sprintf("read_access must be \"open\" (reads need no token) or \"token\"; got %q.", s))
				} else {
					c.API.ReadAccess = s
				}
			}
		}
	}
}

// SitesPerRoundAuto is the word of sites_per_round that sizes each round
// from the time the last rounds took.
const SitesPerRoundAuto = "auto"

// sitesPerRound reads sites_per_round: a whole number of at least 1 (a
// string of digits, as HCL converts it, too), or "auto".
func (l *loader) sitesPerRound(attrs hcl.Attributes, c *Control) {
	attr := attrs["sites_per_round"]
	if attr == nil {
		return
	}
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		l.diags = append(l.diags, diags...)
		return
	}
	choices := "sites_per_round is a whole number of sites a round probes (at least 1), or \"auto\" to size each round from the time the last rounds took"
	switch {
	case !v.IsKnown() || v.IsNull() || v.Type() == cty.Number:
	case v.Type() == cty.String:
		s := v.AsString()
		if s == SitesPerRoundAuto {
			c.SitesPerRound, c.SitesPerRoundAuto = DefaultSitesPerRound, true
			return
		}
		if _, err := strconv.Atoi(s); err != nil {
			l.add(attr.Expr.Range(), "Invalid sites_per_round", fmt.Sprintf("%s; got %q.", choices, s))
			return
		}
	default:
		l.add(attr.Expr.Range(), "Invalid sites_per_round", fmt.Sprintf("%s; got a %s.", choices, v.Type().FriendlyName()))
		return
	}
	l.integer(attrs, "sites_per_round", 1, &c.SitesPerRound)
}
