package fleet

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/schedule"
	"github.com/vigilcdn/vigil/core/vote"
)

// ChainSource is one link of the vote chain.
type ChainSource struct {
	Name string
	Rule vote.Rule
	// Deadline is the source's deadline in a round.
	Deadline time.Duration
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
	// suspect: a confirmation was asked for the site (Fleet.Suspect) and
	// no round has picked it since.
	suspect bool
	// listed: the site is in Fleet.doubt.
	listed bool
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
	Site *Site
	// Index is the site's position in Fleet.Sites.
	Index  int
	Events []decide.Event
}

// Fleet is every site and the chain. It is not safe for concurrent use.
type Fleet struct {
	Chain         []ChainSource
	Sites         []*Site // sorted by name
	SitesPerRound int
	// ConfirmSites is the most sites a confirmation round probes
	// (control { confirm_budget } of SitesPerRound).
	ConfirmSites int
	// Seq is the sequence number of the last round run.
	Seq uint64
	// Owns, when set, limits the rounds to the sites it accepts (the
	// share of a sharded instance).
	Owns func(site string) bool
	// Now is the wall clock of the anti-flap rules; nil is time.Now. A
	// fleet made by NewRoundClock counts rounds instead.
	Now func() time.Time

	clock   clock
	byName  map[string]int
	walker  vote.Walker
	picker  schedule.Picker
	sched   []schedule.Site
	plan    Plan
	events  []decide.Event
	reports []Report
	spans   []span

	// ticks counts the rounds applied that were not confirmations: the
	// round clock's time (confirm.go).
	ticks int64
	// doubt lists the sites that may be due a confirmation: every site in
	// doubt or suspected is in it; a site in it may no longer be (it is
	// dropped when next looked at).
	doubt    []int
	cands    []int
	deferred []int
}

type span struct{ from, to int }

// New builds a fleet from a configuration, every site in its initial state.
// Its anti-flap rules count wall-clock time (Now).
func New(cfg *config.Config) *Fleet {
	return newFleet(cfg, clock{interval: cfg.Control.RoundInterval})
}

// NewRoundClock is New for `vigil simulate`: the anti-flap rules count
// rounds (a duration is a whole number of rounds of round_interval,
// rounded up), so that a replay is deterministic. A replay has no real
// time to size rounds by, so with sites_per_round = "auto" every round
// probes every eligible site, as if probes took no time.
func NewRoundClock(cfg *config.Config) *Fleet {
	f := newFleet(cfg, clock{rounds: true, interval: cfg.Control.RoundInterval})
	if cfg.Control.SitesPerRoundAuto {
		f.SitesPerRound = max(1, len(f.Sites))
	}
	return f
}

func newFleet(cfg *config.Config, clk clock) *Fleet {
	f := &Fleet{SitesPerRound: cfg.Control.SitesPerRound, ConfirmSites: cfg.Control.ConfirmSites(), byName: map[string]int{}, clock: clk}
	chainIdx := map[string]int{}
	for i, s := range cfg.Sources {
		f.Chain = append(f.Chain, ChainSource{Name: s.Name, Rule: s.Rule(), Deadline: s.Timeout})
		f.walker.Rules = append(f.walker.Rules, s.Rule())
		chainIdx[s.Name] = i
	}
	lists := map[uint64][]int{} // sites with the same sources share one list
	for _, cs := range cfg.Sites {
		s := newSite(cs, chainIdx, clk)
		if l, ok := lists[s.Sources]; ok {
			s.SourceList = l
		} else {
			lists[s.Sources] = s.SourceList
		}
		f.Sites = append(f.Sites, s)
	}
	sort.Slice(f.Sites, func(i, j int) bool { return f.Sites[i].Spec.Name < f.Sites[j].Spec.Name })
	for i, s := range f.Sites {
		f.byName[s.Spec.Name] = i
	}
	f.sched = make([]schedule.Site, len(f.Sites))
	return f
}

// SpecOf builds the decision core's spec of a configured site, its
// anti-flap durations in wall-clock ticks (milliseconds) for the default
// round_interval.
func SpecOf(cs *config.Site) *decide.SiteSpec {
	return specOf(cs, clock{})
}

func specOf(cs *config.Site, clk clock) *decide.SiteSpec {
	origins := make([]decide.OriginSpec, len(cs.Origins))
	for i, o := range cs.Origins {
		origins[i] = decide.OriginSpec{Name: o.Name, Level: o.Level}
	}
	spec := decide.NewSiteSpec(cs.Name, origins, cs.Failback,
		int32(cs.HealthCheck.HealthyThreshold), int32(cs.HealthCheck.UnhealthyThreshold), cs.HealthCheck.Enabled)
	spec.AntiFlap = clk.antiFlapSpec(cs.HealthCheck.AntiFlap)
	return spec
}

func newSite(cs *config.Site, chainIdx map[string]int, clk clock) *Site {
	spec := specOf(cs, clk)
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

// Plan is one round in the making: the sites the scheduler picked and
// their jobs for the vote chain. The chain fills the jobs' outcomes (which
// belong to the plan, not to the sites), so a plan can be walked while the
// fleet serves operator actions; [Fleet.Apply] then applies it. A fleet
// has at most one plan in flight: Plan reuses the buffers of the previous
// one.
type Plan struct {
	// Seq is the round's sequence number.
	Seq uint64
	// Picked are the indices (into Fleet.Sites) of the round's sites, in
	// site-name order.
	Picked []int
	// Jobs has one job per picked site, in the same order.
	Jobs []vote.Job
	// All is set when the round picked every eligible site.
	All bool
	// Confirm is set for a confirmation round (Fleet.ConfirmPlan): it
	// probes only sites in doubt, and takes no time on the round clock.
	Confirm bool

	fleet    *Fleet
	outcomes []vote.Outcome
}

// RoundInterval is the configuration's round_interval (immutable: safe
// for concurrent use).
func (f *Fleet) RoundInterval() time.Duration { return f.clock.interval }

// Plan runs the scheduler for the next round: it picks up to
// SitesPerRound eligible sites and prepares one job per site, its disabled
// origins skipped. Nothing of the sites changes until Apply.
func (f *Fleet) Plan() *Plan { return f.PlanSized(nil) }

// PlanSized is Plan with the round's size chosen once the eligible sites
// (those Owns accepts) are counted: it picks up to size(eligible) of them
// (nil: SitesPerRound), for sites_per_round = "auto".
func (f *Fleet) PlanSized(size func(eligible int) int) *Plan {
	p := &f.plan
	p.fleet, p.Seq = f, f.Seq+1
	p.Picked = p.Picked[:0]
	for i, s := range f.Sites {
		eligible := s.Eligible() && (f.Owns == nil || f.Owns(s.Spec.Name))
		f.sched[i] = schedule.Site{Name: s.Spec.Name, LastProbed: s.LastProbed, Eligible: eligible}
		if eligible {
			p.Picked = append(p.Picked, i)
		}
	}
	n := f.SitesPerRound
	if size != nil {
		n = size(len(p.Picked))
	}
	p.All = len(p.Picked) <= n
	if !p.All {
		// Not every eligible site fits: the scheduler chooses.
		p.Picked = append(p.Picked[:0], f.picker.Pick(f.sched, max(n, 1))...)
		sort.Ints(p.Picked) // site-name order, since Sites is sorted by name
	}
	p.Confirm = false
	f.fillJobs(p)
	return p
}

// fillJobs prepares one job per picked site, its disabled origins
// skipped, and takes the picked sites' suspicions (the plan serves them).
func (f *Fleet) fillJobs(p *Plan) {
	n := 0
	for _, i := range p.Picked {
		n += len(f.Sites[i].Outcomes)
	}
	if cap(p.outcomes) < n {
		p.outcomes = make([]vote.Outcome, n)
	}
	p.outcomes = p.outcomes[:n]
	p.Jobs = p.Jobs[:0]
	at := 0
	for _, i := range p.Picked {
		s := f.Sites[i]
		s.suspect = false
		outs := p.outcomes[at : at+len(s.Outcomes) : at+len(s.Outcomes)]
		at += len(s.Outcomes)
		for o := range outs {
			outs[o] = vote.Outcome{Skip: s.State.Origins[o].State == decide.Disabled, By: -1}
		}
		p.Jobs = append(p.Jobs, vote.Job{Site: int32(i), Sources: s.Sources, Outcomes: outs})
	}
}

// Walk asks the chain for the plan's votes through src. It reads only the
// sites' configuration, never their state, so it may run while the fleet
// applies operator actions.
func (p *Plan) Walk(ctx context.Context, src vote.Source) {
	p.fleet.walker.Walk(ctx, src, p.Jobs)
}

// Apply ends the round: it takes the plan's outcomes into the sites and
// applies the verdicts. An origin disabled since Plan gets no verdict, and
// a site that is no longer eligible (its health check paused meanwhile, or
// Owns no longer accepting it) sits the round out. Reports come in site-name order; they and their
// events are valid until the next Apply.
func (f *Fleet) Apply(p *Plan) []Report {
	f.Seq = p.Seq
	if !p.Confirm {
		f.ticks++
	}
	now := f.now()
	f.events = f.events[:0]
	f.reports = f.reports[:0]
	f.spans = f.spans[:0]
	for j, i := range p.Picked {
		s := f.Sites[i]
		if !s.Eligible() || (f.Owns != nil && !f.Owns(s.Spec.Name)) {
			continue
		}
		outs := p.Jobs[j].Outcomes
		for o := range s.Outcomes {
			out := outs[o]
			if s.State.Origins[o].State == decide.Disabled {
				out = vote.Outcome{Skip: true, By: -1}
			}
			s.Outcomes[o] = out
			s.verdicts[o] = out.Verdict
		}
		from := len(f.events)
		f.events = decide.RoundAt(s.Spec, s.State, s.verdicts, s.Levels, f.events, now)
		s.LastProbed = p.Seq
		f.noteDoubt(i)
		f.reports = append(f.reports, Report{Site: s, Index: i})
		f.spans = append(f.spans, span{from, len(f.events)})
	}
	// The events buffer may have moved while growing: slice it at the end.
	for k := range f.reports {
		f.reports[k].Events = f.events[f.spans[k].from:f.spans[k].to:f.spans[k].to]
	}
	return f.reports
}

// Round runs one whole scheduler tick at once: Plan, Walk through src and
// Apply (what `vigil simulate` does).
func (f *Fleet) Round(ctx context.Context, src vote.Source) []Report {
	p := f.Plan()
	p.Walk(ctx, src)
	return f.Apply(p)
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

// SwitchRamped is Switch with the way back ramped (decide.SwitchRamped).
func (f *Fleet) SwitchRamped(site string, level int) ([]decide.Event, error) {
	s := f.Site(site)
	if s == nil {
		return nil, ErrUnknownSite{site}
	}
	return decide.SwitchRamped(s.Spec, s.State, level, s.Levels, f.now())
}
