package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/pluginhost"
	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

// VoteSource is one running link of the chain; *pluginhost.Source is the
// real one.
type VoteSource interface {
	Name() string
	Start(ctx context.Context) hcl.Diagnostics
	Vote(ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, error)
	Close()
}

// statser is implemented by sources that count their failures.
type statser interface{ Stats() pluginhost.Stats }

// Options configure an Engine.
type Options struct {
	Logger hclog.Logger
	// Registerer receives the metrics (a new registry when nil).
	Registerer prometheus.Registerer
	// Store is the state store (required).
	Store store.Store
	// NewSource builds a source from its block; nil means PluginSource.
	NewSource func(src *config.Source, pluginDir string, log hclog.Logger) VoteSource
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Active, when set, is asked before each round, action and commit:
	// false (a standby, or a leader that lost its lease) skips the round,
	// refuses the action with ErrNotActive and writes nothing.
	Active func() bool
	// Owns, when set, filters the sites the scheduler may probe and the
	// actions accepted (sharded mode: the sites this instance owns).
	Owns func(site string) bool
	// OnCommitError is called when a commit fails (such as refused by the
	// store's fence).
	OnCommitError func(error)
	// Hooks, when set, are called at the named points of a commit (fault
	// injection for tests: see Hooks).
	Hooks *Hooks
	// AfterRound, when set, is called by Run after each round, outside the
	// engine's locks, saved or not (what reads a round's results is an
	// Observer instead: it is told only of what is durable).
	AfterRound func(RoundResult)
}

// Hooks are called at the points of a commit where a crash matters most.
// Tests use them to kill the process inside those windows.
type Hooks struct {
	// BeforeCommit runs when a batch is ready and nothing of it is saved.
	BeforeCommit func()
	// AfterCommit runs when the batch is saved and nothing of it has left
	// the process yet (no publication, notification or answer).
	AfterCommit func()
}

// ErrNotActive is returned by actions on an instance that is not active
// (a standby) or does not own the site.
var ErrNotActive = errors.New("this instance does not act on the state now")

// Engine runs vigil's rounds. Its exported methods are safe for
// concurrent use.
//
// # Locks
//
// roundMu serializes rounds. A round holds it from start to end, votes
// included, and nothing else takes it, so a slow source delays only the
// next round.
//
// mu guards the decision state (fleet, per-site info, counters, what is
// pending for the store). It is held only for work in memory and for the
// store commit: to plan a round, to apply its votes and commit, for an
// operator action and its commit, and to install a new configuration. It is
// never held across a call to a plugin: a round takes its plan under mu,
// releases it while the sources vote, and takes it again to apply. An
// action or a reload that lands while a round's sources vote takes effect
// before that round's decisions (a reload, or a refresh that touches the
// round's own sites, makes the round discard its votes and the next one
// start at once). Reads of the store that must not wait for a committing
// round (a shard's claims and its reloads of the others' commits: Claim,
// Follow) queue under a lock of their own, and whoever holds mu takes
// them in before it lets mu go (claim.go).
//
// A standby (Options.Active false) writes nothing: it shows what it loaded
// from the store (settleLocked, mirrorLocked), and a change that finds the
// role gone at its commit is not shown at all.
//
// Reads never take mu: they use the Views, an immutable copy swapped in
// after each commit, and the publication hub.
//
// # Order of effects
//
// Nothing leaves the process before it is durable: a round's or an
// action's changes are committed first; only then are they published,
// shown in the views, told to the observers (Observer: the notifiers, the
// history feed) and answered. A commit
// that fails publishes nothing: the changes stay pending for the next
// commit, and an action is rolled back and refused.
type Engine struct {
	log     hclog.Logger
	opts    Options
	store   store.Store
	hub     *publish.Hub
	metrics *metrics

	roundMu sync.Mutex

	mu            sync.Mutex
	gen           uint64 // bumped by every install: a round of an older generation is discarded
	cfg           *config.Config
	fleet         *fleet.Fleet
	info          []siteInfo                 // by fleet index
	last          []lastRef                  // by fleet index: the last round record of each site
	set           pluginhost.Set[VoteSource] // the sources in force and their blocks' keys
	sources       []VoteSource               // set.Members(), for the rounds
	meta          store.Meta
	pending       []store.Event // journaled, not yet committed
	dirty         indexSet      // sites whose record must be written
	changed       indexSet      // sites whose view and publication entry must be rebuilt
	allChanged    bool          // every site's must (after an install)
	marks         indexSet      // sites whose probe mark must be written
	deleted       []string      // sites to delete from the store
	lastChanged   bool          // e.last moved since the views were built
	retryNow      bool
	lastCommitErr error
	mirrorDiffers bool        // a standby's publication differs from the stored one (warned once)
	inFlight      *fleet.Plan // the plan of the round whose sources are voting, if any
	pubBehind     bool        // sites changed that the publication does not show yet (an inactive refresh)
	pub           publish.Builder
	posBuf        []int32
	intern        interner
	verdictCounts map[verdictKey]int
	part          *partitionDetector // nil unless control { partition } (partition.go)
	observers     []Observer         // told of every durable commit (observer.go)
	roundOwed     unsaved            // the applied round the next commit saves
	// autoRounds are the last rounds' samples, oldest first, and
	// roundSize the size of the last round planned (0: none yet), for
	// sites_per_round = "auto" (roundsize.go).
	autoRounds []RoundSample
	roundSize  int

	statsMu     sync.Mutex
	srcStats    []func() namedStats
	liveSources []VoteSource  // the sources in force, for status calls
	trouble     sourceTrouble // each source's recent failures (sourcetrouble.go)

	views atomic.Pointer[Views]

	journalMu      sync.Mutex
	journalChanged chan struct{} // closed and replaced after each commit that wrote events

	// Fast confirmation (confirm.go).
	confirmKick chan struct{} // wakes Run to set its confirmation timer again
	suspectMu   sync.Mutex
	suspects    map[string]struct{} // sites Suspect named, not yet taken by the fleet
	deferWarned time.Time           // when a deferred confirmation was last logged

	// loads are the reads of the store that wait for mu (Claim, Follow),
	// and the claimed sites awaiting their first probe (claim.go).
	loads loadQueue
	// cfgNow is cfg for Config, which must not wait for mu (a shard
	// claims sites while a round commits).
	cfgNow atomic.Pointer[config.Config]

	// ft times each failover for its report (failover_times.go).
	ftOnce sync.Once
	ft     *failoverTimes
}

// indexSet is a set of fleet indices with O(1) insert and an ordered-by-
// insertion list for the commit.
type indexSet struct {
	in   []bool
	list []int
}

func (s *indexSet) reset(n int) {
	if cap(s.in) < n {
		s.in = make([]bool, n)
	}
	s.in = s.in[:n]
	clear(s.in)
	s.list = s.list[:0]
}

func (s *indexSet) add(i int) {
	if !s.in[i] {
		s.in[i] = true
		s.list = append(s.list, i)
	}
}

func (s *indexSet) remove(i int) {
	if s.in[i] {
		s.in[i] = false
		s.list = slices.DeleteFunc(s.list, func(j int) bool { return j == i })
	}
}

func (s *indexSet) clear() {
	for _, i := range s.list {
		s.in[i] = false
	}
	s.list = s.list[:0]
}

// owedWrites names the sites whose record or probe mark a failed commit
// left unwritten. Rebuilding the fleet renumbers the sites and starts their
// sets afresh, so the names carry what is still owed across it.
type owedWrites struct{ records, marks []string }

// owed returns the owed writes of the sites keep accepts. Called with e.mu
// held, before install.
func (e *Engine) owed(keep func(name string) bool) owedWrites {
	var o owedWrites
	for _, i := range e.dirty.list {
		if name := e.fleet.Sites[i].Spec.Name; keep(name) {
			o.records = append(o.records, name)
		}
	}
	for _, i := range e.marks.list {
		if name := e.fleet.Sites[i].Spec.Name; keep(name) {
			o.marks = append(o.marks, name)
		}
	}
	return o
}

// reowe marks o's sites owed again in the new fleet. Called with e.mu held,
// after install.
func (e *Engine) reowe(o owedWrites) {
	for _, name := range o.records {
		if i := e.fleet.SiteIndex(name); i >= 0 {
			e.dirty.add(i)
		}
	}
	for _, name := range o.marks {
		if i := e.fleet.SiteIndex(name); i >= 0 {
			e.marks.add(i)
		}
	}
}

// New builds an engine for cfg: it loads the stored state, reconciles it
// with the configuration and starts every source. Source start failures
// come back as diagnostics (file:line of the source block).
func New(ctx context.Context, cfg *config.Config, opts Options) (*Engine, hcl.Diagnostics) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.Store == nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "No state store", Detail: "engine.New needs a store"}}
	}
	e := &Engine{log: opts.Logger, opts: opts, store: opts.Store, hub: publish.NewHub(), journalChanged: make(chan struct{}),
		verdictCounts: map[verdictKey]int{}, confirmKick: make(chan struct{}, 1),
		loads: loadQueue{kick: make(chan struct{}, 1)}}
	e.metrics = newMetrics(opts.Registerer, e)
	e.times() // its histograms exist from the start

	// The plugins start while the state loads: both take a while at scale.
	type loaded struct {
		state *store.State
		err   error
	}
	stateCh := make(chan loaded, 1)
	go func() {
		st, err := e.store.Load(ctx)
		stateCh <- loaded{st, err}
	}()
	set, diags := pluginhost.Set[VoteSource]{}.Next(ctx, cfg, e.newSource(cfg.Control.PluginDir))
	ld := <-stateCh
	if ld.err != nil {
		set.Close()
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read the stored state", Detail: ld.err.Error()})
	}
	if diags.HasErrors() {
		return nil, diags
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.meta = ld.state.Meta
	e.set, e.sources = set, set.Members()
	e.setSourceStats()
	records := ld.state.Sites
	e.install(cfg, func(name string) (store.Site, bool) {
		r, ok := records[name]
		return r, ok
	}, nil)
	for name := range records {
		if cfg.Site(name) == nil && e.fleet.Site(name) == nil {
			e.deleted = append(e.deleted, name)
		}
	}
	e.settleLocked(ctx)
	return e, diags
}

// Hub is the publication hub that the API's long-poll and the DNS server
// follow.
func (e *Engine) Hub() *publish.Hub { return e.hub }

// Config returns the configuration in force. It never waits for a round.
func (e *Engine) Config() *config.Config { return e.cfgNow.Load() }

// PluginSource is the real VoteSource of a source block: its plugin,
// run by pluginhost (not started yet). Its plugin's suspicions of a site
// (a node's passive window that tripped) are dropped: the engine's own
// sources pass them to Engine.Suspect (PluginSourceSuspect).
func PluginSource(s *config.Source, pluginDir string, log hclog.Logger) VoteSource {
	return PluginSourceSuspect(s, pluginDir, log, nil)
}

// PluginSourceSuspect is PluginSource whose plugin's suspicions of a site
// go to onSuspect (nil: dropped).
func PluginSourceSuspect(s *config.Source, pluginDir string, log hclog.Logger, onSuspect func(site string)) VoteSource {
	return pluginhost.New(pluginhost.Spec{
		Name: s.Name, Plugin: s.Plugin, PluginDir: pluginDir, Checksum: s.Checksum,
		Env: s.Env, PlaintextTransport: s.PlaintextTransport, Timeout: s.Timeout, Config: s.Config, Range: s.DeclRange, Logger: log,
		OnSuspect: onSuspect,
	})
}

// newSource builds one source (PluginSource unless Options.NewSource),
// its suspicions going to e.Suspect.
func (e *Engine) newSource(pluginDir string) func(*config.Source) VoteSource {
	return func(s *config.Source) VoteSource {
		if e.opts.NewSource != nil {
			return e.opts.NewSource(s, pluginDir, e.log)
		}
		return PluginSourceSuspect(s, pluginDir, e.log, e.Suspect)
	}
}

func (e *Engine) setSourceStats() {
	var fns []func() namedStats
	names := make([]string, len(e.sources))
	for i, s := range e.sources {
		names[i] = s.Name()
	}
	e.metrics.initSources(names)
	for _, s := range e.sources {
		if st, ok := s.(statser); ok {
			name := s.Name()
			fns = append(fns, func() namedStats { return namedStats{name: name, stats: st.Stats()} })
		}
	}
	e.statsMu.Lock()
	e.srcStats = fns
	e.liveSources = append([]VoteSource(nil), e.sources...)
	e.statsMu.Unlock()
}

func (e *Engine) sourceStats() []namedStats {
	e.statsMu.Lock()
	fns := e.srcStats
	e.statsMu.Unlock()
	out := make([]namedStats, 0, len(fns))
	for _, f := range fns {
		out = append(out, f())
	}
	return out
}

// install builds the fleet for cfg and restores each site from recordOf
// (the store's records on start, the running fleet's on reload). carry,
// when set, gives the running round record of a site whose origins are
// unchanged, for the views. Called with e.mu held.
func (e *Engine) install(cfg *config.Config, recordOf func(name string) (store.Site, bool), carry func(name string) lastRef) {
	now := nanos(e.opts.Now())
	f := fleet.New(cfg)
	drillChain(f) // drill.go
	f.Seq = e.meta.Round
	f.Owns = e.opts.Owns
	f.Now = e.opts.Now // the anti-flap rules keep the engine's clock
	n := len(f.Sites)
	e.info = make([]siteInfo, n)
	e.last = make([]lastRef, n)
	e.dirty.reset(n)
	e.changed.reset(n)
	e.marks.reset(n)
	e.fleet, e.cfg = f, cfg
	e.cfgNow.Store(cfg)
	e.gen++
	for i, s := range f.Sites {
		name := s.Spec.Name
		x := &e.info[i]
		*x = newSiteInfo(s)
		enabled := make([]bool, len(s.Config.Origins))
		for j, o := range s.Config.Origins {
			enabled[j] = o.Enabled
		}
		r, ok := recordOf(name)
		if !ok {
			for j := range s.Spec.Origins {
				x.origins[j].since = now
				if !enabled[j] {
					x.origins[j].disabledBy, x.origins[j].cause = disabledByConfig, "disabled in the configuration"
				}
			}
			x.stateSum = stateSum(s, x)
			e.dirty.add(i)
			continue
		}
		if e.meta.ProbedAll > r.LastProbed {
			r.LastProbed, r.LastProbedAt = e.meta.ProbedAll, e.meta.ProbedAllAt
		}
		events, changed := restore(s, x, r, enabled, now)
		for _, ev := range events {
			e.addEvent(name, 0, "", ev, e.opts.Now())
		}
		x.stateSum = stateSum(s, x)
		if changed {
			e.dirty.add(i)
		}
		if carry != nil {
			e.last[i] = carry(name)
		}
	}
	e.allChanged, e.lastChanged = true, true
}

// Close stops every source. The store is the caller's to close. Close does
// not wait for a round in progress: its votes fail and it commits nothing
// more than what it had.
func (e *Engine) Close() {
	e.mu.Lock()
	set := e.set
	e.set, e.sources = pluginhost.Set[VoteSource]{}, nil
	e.mu.Unlock()
	set.Close()
}

// JournalChanged returns a channel closed at the next commit that writes
// events (for long-polls of the journal).
func (e *Engine) JournalChanged() <-chan struct{} {
	e.journalMu.Lock()
	defer e.journalMu.Unlock()
	return e.journalChanged
}

// addEvent journals an event (committed with the next commit) at time at:
// a round's events carry the round's start, the time the history records
// that round at and the status gives as an origin's since, so that a
// switch and the round that made it agree however long the round took;
// an operator's action or a reload carries when it happened.
func (e *Engine) addEvent(site string, round uint64, actor string, ev decide.Event, at time.Time) {
	e.meta.LastEvent++
	e.pending = append(e.pending, store.Event{
		Seq: e.meta.LastEvent, Time: at.UTC(), Site: site, Round: round, Actor: actor, Event: ev,
	})
}

// touch marks site i for writing when its durable state changed since it
// was last marked. Called with e.mu held.
func (e *Engine) touch(i int) {
	x := &e.info[i]
	sum := stateSum(e.fleet.Sites[i], x)
	if sum == x.stateSum {
		return
	}
	x.stateSum = sum
	e.dirty.add(i)
	e.changed.add(i)
}

func (e *Engine) markProbed(i int) { e.marks.add(i) }

func (e *Engine) clearProbeMarks() { e.marks.clear() }

// errStoreFailed wraps a failed commit.
var errStoreFailed = errors.New("the state store refused the write")
