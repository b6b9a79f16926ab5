package engine

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/vote"
)

// ProbeResult is one dry-run round for one site: every source's votes for
// every enabled origin, the verdict and the settling source. Nothing is
// decided or saved.
type ProbeResult struct {
	Site     string        `json:"site"`
	Hostname string        `json:"hostname"`
	Origins  []ProbeOrigin `json:"origins"`
}

// ProbeOrigin is one origin of a ProbeResult.
type ProbeOrigin struct {
	Origin  string     `json:"origin"`
	Address string     `json:"address"`
	Level   int        `json:"level"`
	Enabled bool       `json:"enabled"`
	Verdict string     `json:"verdict"`
	By      *string    `json:"by"`
	Asked   []string   `json:"asked"`
	Votes   []VoteView `json:"votes"`
}

// Probe runs the chain once over the named site with the given sources
// (one per cfg.Sources entry, in order), changing no state: it is the
// operator's "why is my origin failing?". Disabled origins are listed but
// not probed.
func Probe(ctx context.Context, cfg *config.Config, site string, sources []VoteSource, log hclog.Logger) (*ProbeResult, error) {
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
	one := *cfg
	one.Sites = []*config.Site{cs}
	f := fleet.New(&one)
	s := f.Sites[0]
	asker := &chainAsker{fleet: f, sources: sources, log: log, votes: map[vote.Target][]VoteView{}}
	for i := range s.Outcomes {
		s.Outcomes[i].Skip = s.State.Origins[i].State == decide.Disabled
	}
	var w vote.Walker
	for _, src := range f.Chain {
		w.Rules = append(w.Rules, src.Rule)
	}
	w.Walk(ctx, asker, []vote.Job{{Site: 0, Sources: s.Sources, Outcomes: s.Outcomes}})
	res := &ProbeResult{Site: cs.Name, Hostname: cs.Hostname}
	for i, o := range cs.Origins {
		po := ProbeOrigin{Origin: o.Name, Address: o.Address, Level: o.Level, Enabled: o.Enabled, Verdict: "none", Asked: []string{}, Votes: []VoteView{}}
		if o.Enabled {
			out := s.Outcomes[i]
			po.Verdict = out.Verdict.String()
			po.Asked = s.Asked(f.Chain, i)
			if out.By >= 0 {
				name := f.Chain[out.By].Name
				po.By = &name
			}
			po.Votes = append(po.Votes, asker.votes[vote.Target{Site: 0, Origin: int32(i)}]...)
		}
		res.Origins = append(res.Origins, po)
	}
	return res, nil
}
