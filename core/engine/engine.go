package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/vigilcdn/vigil/sdk/publication"
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
	// OnCommit is called after each commit that wrote events (the
	// notifiers' wake-up).
	OnCommit func()
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
}

// ErrNotActive is returned by actions on an instance that is not active
// (a standby) or does not own the site.
var ErrNotActive = errors.New("this instance does not act on the state now")

// Engine runs vigil's rounds. Its exported methods are safe for
// concurrent use; rounds and actions are serialized.
type Engine struct {
	log     hclog.Logger
	opts    Options
	store   store.Store
	hub     *publish.Hub
	metrics *metrics

	mu         sync.Mutex // held for a whole round and for each action
	cfg        *config.Config
	fleet      *fleet.Fleet
	extras     map[string]*siteExtra
	sources    []VoteSource
	sourceKeys []string
	meta       store.Meta
	pending    []store.Event // events not yet committed
	dirty      map[string]bool
	lastPub    *publication.Snapshot

	statsMu     sync.Mutex
	srcStats    []func() namedStats
	liveSources []VoteSource // the sources in force, for status calls outside the round lock

	views atomic.Pointer[Views]

	journalMu      sync.Mutex
	journalChanged chan struct{} // closed and replaced after each commit that wrote events
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
	e := &Engine{log: opts.Logger, opts: opts, store: opts.Store, hub: publish.NewHub(), dirty: map[string]bool{}, journalChanged: make(chan struct{})}
	state, err := e.store.Load(ctx)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the stored state", Detail: err.Error()}}
	}
	e.meta = state.Meta
	e.metrics = newMetrics(opts.Registerer, e)

	sources, keys, diags := e.startSources(ctx, cfg, nil, nil)
	if diags.HasErrors() {
		return nil, diags
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sources, e.sourceKeys = sources, keys
	e.setSourceStats()
	e.install(cfg, state.Sites, nil)
	e.commitLocked(ctx)
	return e, diags
}

// Hub is the publication hub that the API's long-poll and the DNS server
// follow.
func (e *Engine) Hub() *publish.Hub { return e.hub }

// Config returns the configuration in force.
func (e *Engine) Config() *config.Config {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cfg
}

func (e *Engine) extra(name string) *siteExtra {
	x := e.extras[name]
	if x == nil {
		x = newSiteExtra()
		e.extras[name] = x
	}
	return x
}

// PluginSource is the real VoteSource of a source block: its plugin,
// run by pluginhost (not started yet).
func PluginSource(s *config.Source, pluginDir string, log hclog.Logger) VoteSource {
	return pluginhost.New(pluginhost.Spec{
		Name: s.Name, Plugin: s.Plugin, PluginDir: pluginDir, Checksum: s.Checksum,
		Env: s.Env, Timeout: s.Timeout, Config: s.Config, Range: s.DeclRange, Logger: log,
	})
}

// sourceKey fingerprints a source block: a changed key means the plugin
// must be restarted on reload.
func sourceKey(cfg *config.Config, s *config.Source) string {
	key := fmt.Sprintf("%s|%s|%s|%v|%s|%d|%d", s.Name, s.Plugin, s.Checksum, s.Env, s.Timeout, s.MinVotes, s.Tally)
	if s.Config != nil {
		if f := cfg.Files[s.DeclRange.Filename]; f != nil {
			if r, ok := bodyRange(s.Config); ok && r.End.Byte <= len(f.Bytes) {
				key += "|" + string(f.Bytes[r.Start.Byte:r.End.Byte])
			}
		}
	}
	return key + "|" + cfg.Control.PluginDir
}

func bodyRange(b hcl.Body) (hcl.Range, bool) {
	type ranger interface{ Range() hcl.Range }
	if r, ok := b.(ranger); ok {
		return r.Range(), true
	}
	return hcl.Range{}, false
}

// startSources starts the sources of cfg, reusing the running ones whose
// block did not change.
func (e *Engine) startSources(ctx context.Context, cfg *config.Config, old []VoteSource, oldKeys []string) ([]VoteSource, []string, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	sources := make([]VoteSource, len(cfg.Sources))
	keys := make([]string, len(cfg.Sources))
	reused := map[int]bool{}
	for i, s := range cfg.Sources {
		keys[i] = sourceKey(cfg, s)
		for j, k := range oldKeys {
			if k == keys[i] && !reused[j] {
				sources[i], reused[j] = old[j], true
				break
			}
		}
		if sources[i] != nil {
			continue
		}
		newSource := e.opts.NewSource
		if newSource == nil {
			newSource = PluginSource
		}
		src := newSource(s, cfg.Control.PluginDir, e.log)
		d := src.Start(ctx)
		diags = append(diags, d...)
		sources[i] = src
	}
	if diags.HasErrors() {
		for i, s := range sources {
			if s != nil && !isOld(s, old) {
				sources[i].Close()
			}
		}
		return nil, nil, diags
	}
	return sources, keys, diags
}

func isOld(s VoteSource, old []VoteSource) bool {
	for _, o := range old {
		if o == s {
			return true
		}
	}
	return false
}

func (e *Engine) setSourceStats() {
	var fns []func() namedStats
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

// install builds the fleet for cfg and restores each site from records
// (the store's on start, the old fleet's on reload). Called with e.mu held.
func (e *Engine) install(cfg *config.Config, records map[string]store.Site, oldExtras map[string]*siteExtra) {
	now := e.opts.Now()
	f := fleet.New(cfg)
	f.Seq = e.meta.Round
	f.Owns = e.opts.Owns
	extras := map[string]*siteExtra{}
	live := map[string]bool{}
	for _, s := range f.Sites {
		name := s.Spec.Name
		live[name] = true
		x := newSiteExtra()
		if oldExtras != nil && oldExtras[name] != nil {
			x = oldExtras[name]
		}
		extras[name] = x
		enabled := make([]bool, len(s.Config.Origins))
		for i, o := range s.Config.Origins {
			enabled[i] = o.Enabled
		}
		r, ok := records[name]
		if !ok {
			for i, o := range s.Spec.Origins {
				ox := x.origin(o.Name)
				ox.since = now
				if !enabled[i] {
					ox.disabledBy = "config"
				}
			}
			e.dirty[name] = true
			continue
		}
		events := restore(s, x, r, enabled, now)
		for _, ev := range events {
			e.addEvent(name, 0, "", ev)
		}
		x.lastEvents = events
		e.dirty[name] = true
	}
	// Drop what the configuration no longer has.
	for name := range records {
		if !live[name] {
			e.dirty[name] = false // delete marker
		}
	}
	e.cfg, e.fleet, e.extras = cfg, f, extras
	e.metrics.siteLevel.Reset()
	e.metrics.originState.Reset()
	for _, s := range f.Sites {
		e.observeSite(s)
	}
	e.republish()
	e.refreshViews(nil)
}

// addEvent journals an event (committed with the next commit).
func (e *Engine) addEvent(site string, round uint64, actor string, ev decide.Event) {
	e.meta.LastEvent++
	e.pending = append(e.pending, store.Event{
		Seq: e.meta.LastEvent, Time: e.opts.Now().UTC(), Site: site, Round: round, Actor: actor, Event: ev,
	})
	e.metrics.events.WithLabelValues(ev.Kind.String()).Inc()
	if ev.Kind == decide.KindLevelSwitched {
		e.metrics.switches.WithLabelValues(ev.Reason.String()).Inc()
	}
	log := e.log.With("site", site, "event", ev.Kind.String())
	if actor != "" {
		log = log.With("actor", actor)
	}
	switch ev.Kind {
	case decide.KindOriginState:
		log.Info("origin state changed", "origin", ev.Origin, "from", ev.From.String(), "to", ev.To.String())
	case decide.KindLevelSwitched:
		log.Warn("level switched", "from", ev.FromLevel, "to", ev.ToLevel, "reason", ev.Reason.String())
	case decide.KindFailbackAvailable:
		log.Warn("origin recovered (manual failback available)", "level", ev.Level)
	case decide.KindAllLevelsUnhealthy:
		log.Error("all origin levels unhealthy", "level", ev.Level)
	}
}

// observeSite updates the per-site gauges.
func (e *Engine) observeSite(s *fleet.Site) {
	e.metrics.siteLevel.WithLabelValues(s.Spec.Name).Set(float64(s.State.Level))
	for i, o := range s.Spec.Origins {
		cur := s.State.Origins[i].State
		for h := decide.Unknown; h <= decide.Disabled; h++ {
			v := 0.0
			if h == cur {
				v = 1
			}
			e.metrics.originState.WithLabelValues(s.Spec.Name, o.Name, h.String()).Set(v)
		}
	}
}

// commitLocked writes the dirty sites, the pending events and the meta in
// one transaction. On failure everything stays pending for the next commit.
func (e *Engine) commitLocked(ctx context.Context) bool {
	if !e.active() {
		// Not ours to write: whoever becomes active reloads the state.
		e.pending = e.pending[:0]
		clear(e.dirty)
		return false
	}
	b := store.Batch{Meta: e.meta, Events: e.pending}
	for name, live := range e.dirty {
		if !live {
			b.Deleted = append(b.Deleted, name)
			continue
		}
		if s := e.fleet.Site(name); s != nil {
			b.Sites = append(b.Sites, record(s, e.extra(name)))
		}
	}
	if err := e.store.Commit(ctx, b); err != nil {
		e.metrics.storeErrors.Inc()
		e.log.Error("cannot save state; will retry with the next commit", "error", err)
		if e.opts.OnCommitError != nil {
			e.opts.OnCommitError(err)
		}
		return false
	}
	wrote := len(e.pending) > 0
	e.pending = e.pending[:0]
	clear(e.dirty)
	if wrote {
		e.journalMu.Lock()
		close(e.journalChanged)
		e.journalChanged = make(chan struct{})
		e.journalMu.Unlock()
		if e.opts.OnCommit != nil {
			e.opts.OnCommit()
		}
	}
	return true
}

// republish rebuilds the publication and, when it changed, publishes it
// under a new version. Called with e.mu held.
func (e *Engine) republish() {
	snap := &publication.Snapshot{}
	for _, s := range e.fleet.Sites {
		ps := publication.Site{Name: s.Spec.Name, Hostname: s.Config.Hostname, Level: s.State.Level, Origins: []publication.Origin{}}
		for i, o := range s.Spec.Origins {
			st := s.State.Origins[i].State
			if o.Level != s.State.Level || st == decide.Disabled {
				continue
			}
			ps.Origins = append(ps.Origins, publication.Origin{Name: o.Name, Address: s.Config.Origins[i].Address, State: st.String()})
		}
		snap.Sites = append(snap.Sites, ps)
	}
	if e.lastPub != nil && samePublication(e.lastPub, snap) && e.hub.Current().Version == e.meta.Publication {
		return
	}
	digest := publicationDigest(snap)
	if e.lastPub == nil && e.meta.Publication > 0 && (digest == e.meta.PublicationDigest || !e.active()) {
		// First publication after a restart (or a standby mirroring the
		// store): the same content keeps its stored version, so nodes
		// holding it are not woken for nothing.
		snap.Version = e.meta.Publication
	} else {
		// New content, or content that differs from what the stored
		// version meant (the configuration changed while vigil was
		// down): a new version, so every follower picks it up.
		e.meta.Publication++
		snap.Version = e.meta.Publication
	}
	e.meta.PublicationDigest = digest
	e.lastPub = snap
	e.hub.Publish(snap)
	e.metrics.publication.Set(float64(snap.Version))
}

func samePublication(a, b *publication.Snapshot) bool {
	if len(a.Sites) != len(b.Sites) {
		return false
	}
	for i := range a.Sites {
		x, y := a.Sites[i], b.Sites[i]
		if x.Name != y.Name || x.Hostname != y.Hostname || x.Level != y.Level || len(x.Origins) != len(y.Origins) {
			return false
		}
		for j := range x.Origins {
			if x.Origins[j] != y.Origins[j] {
				return false
			}
		}
	}
	return true
}

// Close stops every source. The store is the caller's to close.
func (e *Engine) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.sources {
		s.Close()
	}
	e.sources = nil
}

// JournalChanged returns a channel closed at the next commit that writes
// events (for long-polls of the journal).
func (e *Engine) JournalChanged() <-chan struct{} {
	e.journalMu.Lock()
	defer e.journalMu.Unlock()
	return e.journalChanged
}

// publicationDigest fingerprints a snapshot's content (not its version).
func publicationDigest(s *publication.Snapshot) string {
	b, _ := json.Marshal(s.Sites)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
