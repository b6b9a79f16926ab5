package fleet

import (
	"context"
	"fmt"
	"sort"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/schedule"
	"github.com/vigilcdn/vigil/core/vote"
)

// ChainSource is one link of the vote chain.
type ChainSource struct {
	Name string
	Rule vote.Rule
}

// Site is one site with its static spec and its decision state.
type Site struct {
	Spec   *decide.SiteSpec
	Config *config.Site
	State  *decide.SiteState
	// LastProbed is the round sequence number that last probed the site,
	// 0 for never.
	LastProbed uint64
	// Sources is the site's chain subset as a bit set of chain indices.
	Sources uint64
	// SourceList is the site's chain subset, chain indices ascending.
	SourceList []int
	// Outcomes is the chain's outcome per origin in the site's last probed
	// round (zero values before the first).
	Outcomes []vote.Outcome
	// Levels is each level's health, by level index, as of the last round
	// or action.
	Levels []decide.Health

	verdicts []vote.Verdict
}

// Eligible reports whether the scheduler may probe the site: health check
// enabled and at least two enabled origins.
func (s *Site) Eligible() bool {
	return s.Spec.HealthCheck && s.State.EnabledOrigins() >= 2
}

// Asked returns the names of the sources an origin was handed to in the
// site's last probed round.
func (s *Site) Asked(chain []ChainSource, origin int) []string {
	out := make([]string, 0, s.Outcomes[origin].Asked)
	for i := 0; i < int(s.Outcomes[origin].Asked) && i < len(s.SourceList); i++ {
		out = append(out, chain[s.SourceList[i]].Name)
	}
	return out
}

// Report is what one round did to one site. Events is only valid until the
// next round.
type Report struct {
	Site   *Site
	Events []decide.Event
}

// Fleet is every site and the chain. It is not safe for concurrent use.
type Fleet struct {
	Chain         []ChainSource
	Sites         []*Site // sorted by name
	SitesPerRound int
	// Seq is the sequence number of the last round run.
	Seq uint64
	// Owns, when set, limits the rounds to the sites it accepts (the
	// share of a sharded instance).
	Owns func(site string) bool

	byName  map[string]int
	walker  vote.Walker
	picker  schedule.Picker
	sched   []schedule.Site
	jobs    []vote.Job
	events  []decide.Event
	reports []Report
	picked  []int
	spans   []span
}

type span struct{ from, to int }

// New builds a fleet from a configuration, every site in its initial state.
func New(cfg *config.Config) *Fleet {
	f := &Fleet{SitesPerRound: cfg.Control.SitesPerRound, byName: map[string]int{}}
	chainIdx := map[string]int{}
	for i, s := range cfg.Sources {
		f.Chain = append(f.Chain, ChainSource{Name: s.Name, Rule: s.Rule()})
		f.walker.Rules = append(f.walker.Rules, s.Rule())
		chainIdx[s.Name] = i
	}
	for _, cs := range cfg.Sites {
		f.Sites = append(f.Sites, newSite(cs, chainIdx))
	}
	sort.Slice(f.Sites, func(i, j int) bool { return f.Sites[i].Spec.Name < f.Sites[j].Spec.Name })
	for i, s := range f.Sites {
		f.byName[s.Spec.Name] = i
	}
	f.sched = make([]schedule.Site, len(f.Sites))
	return f
}

// SpecOf builds the decision core's spec of a configured site.
func SpecOf(cs *config.Site) *decide.SiteSpec {
	origins := make([]decide.OriginSpec, len(cs.Origins))
	for i, o := range cs.Origins {
		origins[i] = decide.OriginSpec{Name: o.Name, Level: o.Level}
	}
	return decide.NewSiteSpec(cs.Name, origins, cs.Failback,
		int32(cs.HealthCheck.HealthyThreshold), int32(cs.HealthCheck.UnhealthyThreshold), cs.HealthCheck.Enabled)
}

func newSite(cs *config.Site, chainIdx map[string]int) *Site {
	spec := SpecOf(cs)
	enabled := make([]bool, len(cs.Origins))
	for i, o := range cs.Origins {
		enabled[i] = o.Enabled
	}
	s := &Site{Spec: spec, Config: cs, State: decide.NewSiteState(spec, enabled)}
	s.setSources(cs, chainIdx)
	s.Outcomes = make([]vote.Outcome, len(spec.Origins))
	for i := range s.Outcomes {
		s.Outcomes[i].By = -1
	}
	s.verdicts = make([]vote.Verdict, len(spec.Origins))
	s.Levels = make([]decide.Health, len(spec.Levels))
	decide.LevelHealth(spec, s.State, s.Levels)
	return s
}

func (s *Site) setSources(cs *config.Site, chainIdx map[string]int) {
	s.Sources, s.SourceList = 0, nil
	for _, n := range cs.Sources {
		if i, ok := chainIdx[n]; ok {
			s.Sources |= 1 << i
			s.SourceList = append(s.SourceList, i)
		}
	}
	sort.Ints(s.SourceList)
}

// Site returns the named site, or nil.
func (f *Fleet) Site(name string) *Site {
	if i, ok := f.byName[name]; ok {
		return f.Sites[i]
	}
	return nil
}

// Round runs one scheduler tick: it picks up to SitesPerRound eligible
// sites, walks the chain over their enabled origins through src, and applies
// the verdicts. Reports come in site-name order; they and their events are
// valid until the next call.
func (f *Fleet) Round(ctx context.Context, src vote.Source) []Report {
	f.Seq++
	for i, s := range f.Sites {
		f.sched[i] = schedule.Site{Name: s.Spec.Name, LastProbed: s.LastProbed, Eligible: s.Eligible() && (f.Owns == nil || f.Owns(s.Spec.Name))}
	}
	picked := f.picker.Pick(f.sched, f.SitesPerRound)
	f.picked = append(f.picked[:0], picked...)
	sort.Ints(f.picked) // site-name order, since Sites is sorted by name

	f.jobs = f.jobs[:0]
	for _, i := range f.picked {
		s := f.Sites[i]
		for o := range s.Outcomes {
			s.Outcomes[o].Skip = s.State.Origins[o].State == decide.Disabled
		}
		f.jobs = append(f.jobs, vote.Job{Site: int32(i), Sources: s.Sources, Outcomes: s.Outcomes})
	}
	f.walker.Walk(ctx, src, f.jobs)

	f.events = f.events[:0]
	f.reports = f.reports[:0]
	f.spans = f.spans[:0]
	for _, i := range f.picked {
		s := f.Sites[i]
		for o := range s.Outcomes {
			s.verdicts[o] = s.Outcomes[o].Verdict
		}
		from := len(f.events)
		f.events = decide.Round(s.Spec, s.State, s.verdicts, s.Levels, f.events)
		s.LastProbed = f.Seq
		f.reports = append(f.reports, Report{Site: s})
		f.spans = append(f.spans, span{from, len(f.events)})
	}
	// The events buffer may have moved while growing: slice it at the end.
	for k := range f.reports {
		f.reports[k].Events = f.events[f.spans[k].from:f.spans[k].to:f.spans[k].to]
	}
	return f.reports
}

// ErrUnknownSite is returned (wrapped) for an action on a site that does not
// exist.
type ErrUnknownSite struct{ Name string }

func (e ErrUnknownSite) Error() string { return fmt.Sprintf("no site %s", e.Name) }

// Switch is the operator's manual switch of a site to a level.
func (f *Fleet) Switch(site string, level int) ([]decide.Event, error) {
	s := f.Site(site)
	if s == nil {
		return nil, ErrUnknownSite{site}
	}
	return decide.Switch(s.Spec, s.State, level)
}

// Disable takes an origin out of votes and level health.
func (f *Fleet) Disable(site, origin string) ([]decide.Event, error) {
	s := f.Site(site)
	if s == nil {
		return nil, ErrUnknownSite{site}
	}
	ev, err := decide.Disable(s.Spec, s.State, origin)
	if err == nil {
		decide.LevelHealth(s.Spec, s.State, s.Levels)
	}
	return ev, err
}

// Enable puts a disabled origin back, unknown.
func (f *Fleet) Enable(site, origin string) ([]decide.Event, error) {
	s := f.Site(site)
	if s == nil {
		return nil, ErrUnknownSite{site}
	}
	ev, err := decide.Enable(s.Spec, s.State, origin)
	if err == nil {
		decide.LevelHealth(s.Spec, s.State, s.Levels)
	}
	return ev, err
}

// SiteIndex returns the index of the named site in Sites, or -1.
func (f *Fleet) SiteIndex(name string) int {
	if i, ok := f.byName[name]; ok {
		return i
	}
	return -1
}
