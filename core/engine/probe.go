package engine

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/vote"
)

// ProbeResult is one dry-run round for one site: every source's votes for
// every enabled origin, the verdict and the settling source. Nothing is
// ProbeResult is one dry-run round for a site (package api).
type ProbeResult = api.ProbeResult

// ProbeOrigin is one origin of a ProbeResult.
type ProbeOrigin = api.ProbeOrigin

// Probe runs the chain once over the named site with the given sources
// (one per cfg.Sources entry, in order), changing no state: it is the
// operator's "why is my origin failing?". Disabled origins are listed but
// not probed.
func Probe(ctx context.Context, cfg *config.Config, site string, sources []VoteSource, log hclog.Logger) (*ProbeResult, error) {
	return probe(ctx, cfg, site, sources, log, nil)
}

// ProbeSite is Probe through the running engine's own sources (so the node
// gateway's attached nodes vote too), with the origins' live enabled state.
// It changes no state and does not wait for a round in progress (a source
// busy with the round answers the probe when it is free, within its own
// deadline).
func (e *Engine) ProbeSite(ctx context.Context, site string) (*ProbeResult, error) {
	e.mu.Lock()
	s := e.fleet.Site(site)
	if s == nil {
		e.mu.Unlock()
		return nil, &ActionError{Err: fmt.Errorf("no site %s", site), Code: "unknown_site"}
	}
	disabled := map[string]bool{}
	for i, o := range s.Spec.Origins {
		disabled[o.Name] = s.State.Origins[i].State == decide.Disabled
	}
	cfg, sources := e.cfg, e.sources
	e.mu.Unlock()
	return probe(ctx, cfg, site, sources, e.log, disabled)
}

func probe(ctx context.Context, cfg *config.Config, site string, sources []VoteSource, log hclog.Logger, disabled map[string]bool) (*ProbeResult, error) {
	cs := cfg.Site(site)
	if cs == nil {
		return nil, fmt.Errorf("no site %s", site)
	}
	if len(sources) != len(cfg.Sources) {
		return nil, fmt.Errorf("probe: %d sources for a chain of %d", len(sources), len(cfg.Sources))
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	one := &config.Config{Control: cfg.Control, Sources: cfg.Sources, Sites: []*config.Site{cs}, Files: cfg.Files}
	f := fleet.New(one)
	s := f.Sites[0]
	asker := newAsker(f, sources, log, 0, func(t vote.Target) int32 { return t.Origin }, nil)
	enabled := make([]bool, len(cs.Origins))
	for i, o := range cs.Origins {
		enabled[i] = o.Enabled
		if d, ok := disabled[o.Name]; ok {
			enabled[i] = !d
		}
		s.Outcomes[i].Skip = !enabled[i]
	}
	var w vote.Walker
	for _, src := range f.Chain {
		w.Rules = append(w.Rules, src.Rule)
	}
	w.Walk(ctx, asker, []vote.Job{{Site: 0, Sources: s.Sources, Outcomes: s.Outcomes}})
	votes, starts := asker.grouped(len(cs.Origins))
	res := &ProbeResult{Site: cs.Name, Hostname: cs.Hostname}
	for i, o := range cs.Origins {
		po := ProbeOrigin{Origin: o.Name, Address: o.Address, Level: o.Level, Enabled: enabled[i], Verdict: "none", Asked: []string{}, Votes: []api.VoteView{}}
		if enabled[i] {
			out := s.Outcomes[i]
			po.Verdict = out.Verdict.String()
			po.Asked = s.Asked(f.Chain, i)
			if out.By >= 0 {
				name := f.Chain[out.By].Name
				po.By = &name
			}
			for _, v := range votes[starts[i]:starts[i+1]] {
				po.Votes = append(po.Votes, v.view(f.Chain))
			}
		}
		res.Origins = append(res.Origins, po)
	}
	for i, err := range asker.errs {
		if err != nil {
			res.Failed = append(res.Failed, api.ProbeFailure{Source: f.Chain[i].Name, Error: err.Error()})
		}
	}
	return res, nil
}
