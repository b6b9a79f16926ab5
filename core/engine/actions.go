package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/store"
)

// ActionError is an operator action refused for a reason the operator can
// fix (unknown site, origin or level), or because the change could not be
// saved (nothing was changed then).
type ActionError struct {
	Err error
	// Code is "unknown_site", "unknown_level", "unknown_origin",
	// "last_enabled_origin" (DisableGuarded) or "not_saved".
	Code string
	Hint string
}

func (e *ActionError) Error() string { return e.Err.Error() }
func (e *ActionError) Unwrap() error { return e.Err }

// act applies an operator action and commits it before answering. When
// the commit fails the action is undone in memory, nothing of it leaves the
// process, and the answer is an ActionError with code "not_saved".
func (e *Engine) act(ctx context.Context, site, actor string, do func(f *fleet.Fleet) ([]decide.Event, error)) ([]decide.Event, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.takeLoadsLocked(ctx) // a site just claimed is acted on as stored (claim.go)
	if !e.active() || (e.opts.Owns != nil && e.fleet.Site(site) != nil && !e.opts.Owns(site)) {
		return nil, fmt.Errorf("site %s: %w", site, ErrNotActive)
	}
	i := e.fleet.SiteIndex(site)
	var undo func()
	if i >= 0 {
		undo = e.saveSite(i)
	}
	events, err := do(e.fleet)
	if err != nil {
		ae := &ActionError{Err: err, Code: "unknown_origin"}
		if errors.As(err, &ae) {
			return nil, ae
		}
		var ul *decide.UnknownLevelError
		var us fleet.ErrUnknownSite
		switch {
		case errors.As(err, &ul):
			ae.Code, ae.Hint = "unknown_level", ul.Hint()
		case errors.As(err, &us):
			ae.Code = "unknown_site"
		case errors.Is(err, decide.ErrNoRamp):
			ae.Code = "no_ramp"
		}
		return nil, ae
	}
	s := e.fleet.Sites[i]
	x := &e.info[i]
	now := nanos(e.opts.Now())
	for _, ev := range events {
		if ev.Kind == decide.KindOriginState {
			oi := s.Spec.OriginIndex(ev.Origin)
			x.origins[oi].since = now
			if ev.To == decide.Disabled {
				x.origins[oi].disabledBy, x.origins[oi].cause = disabledByOperator, "disabled by "+actor
			} else {
				x.origins[oi].disabledBy, x.origins[oi].cause = disabledByNone, "enabled by "+actor+"; not probed since"
			}
		}
		e.addEvent(site, 0, actor, ev, e.opts.Now())
	}
	decide.LevelHealth(s.Spec, s.State, s.Levels)
	e.touch(i)
	if !e.flushLocked(ctx) {
		undo()
		if !e.active() { // the role was lost meanwhile: the instance in charge acts now
			return nil, fmt.Errorf("site %s: %w", site, ErrNotActive)
		}
		return nil, &ActionError{Code: "not_saved", Err: fmt.Errorf("site %s: the change was not saved, so it was not made: %w", site, errStoreFailed),
			Hint: storeHint(e.lastCommitErr)}
	}
	if events == nil {
		events = []decide.Event{}
	}
	return events, nil
}

// saveSite returns a function that puts site i back as it is now, with
// what is pending for the store. Called with e.mu held.
func (e *Engine) saveSite(i int) (undo func()) {
	s := e.fleet.Sites[i]
	state := *s.State
	state.Origins = slices.Clone(s.State.Origins)
	state.Baseline = slices.Clone(s.State.Baseline)
	levels := slices.Clone(s.Levels)
	info := e.info[i]
	info.origins = slices.Clone(info.origins)
	pending, lastEvent := len(e.pending), e.meta.LastEvent
	wasDirty, wasChanged := e.dirty.in[i], e.changed.in[i]
	return func() {
		*s.State = state
		copy(s.Levels, levels)
		e.info[i] = info
		if len(e.pending) >= pending {
			e.pending = e.pending[:pending]
		}
		e.meta.LastEvent = lastEvent
		if !wasDirty {
			e.dirty.remove(i)
		}
		if !wasChanged {
			e.changed.remove(i)
		}
	}
}

// Switch is the operator's manual switch of site to level.
func (e *Engine) Switch(ctx context.Context, site string, level int, actor string) ([]decide.Event, error) {
	return e.act(ctx, site, actor, func(f *fleet.Fleet) ([]decide.Event, error) { return f.Switch(site, level) })
}

// SwitchRamped is Switch with the way back ramped, as an automatic
// failback is (decide.SwitchRamped); a site without a ramp configured is
// refused with code "no_ramp".
func (e *Engine) SwitchRamped(ctx context.Context, site string, level int, actor string) ([]decide.Event, error) {
	return e.act(ctx, site, actor, func(f *fleet.Fleet) ([]decide.Event, error) { return f.SwitchRamped(site, level) })
}

// Disable takes an origin out of votes, level health and the publication.
func (e *Engine) Disable(ctx context.Context, site, origin, actor string) ([]decide.Event, error) {
	return e.act(ctx, site, actor, func(f *fleet.Fleet) ([]decide.Event, error) { return f.Disable(site, origin) })
}

// DisableGuarded is Disable as the operator's surfaces (the API, the CLI,
// the status page) do it: unless force is set, it refuses, with code
// "last_enabled_origin", to disable the last enabled origin of the site's
// current level, which would leave the site on a level with nothing to
// serve and nothing to probe (the decision rules do not move a site off a
// level for that). The check and the change happen under one lock.
func (e *Engine) DisableGuarded(ctx context.Context, site, origin, actor string, force bool) ([]decide.Event, error) {
	return e.act(ctx, site, actor, func(f *fleet.Fleet) ([]decide.Event, error) {
		if !force {
			if s := f.Site(site); s != nil {
				if err := lastEnabledGuard(s.Spec, s.State, origin); err != nil {
					return nil, err
				}
			}
		}
		return f.Disable(site, origin)
	})
}

// lastEnabledGuard refuses to disable origin when it is the last enabled
// origin of the current level; the hint names the way out.
func lastEnabledGuard(spec *decide.SiteSpec, st *decide.SiteState, origin string) error {
	oi := spec.OriginIndex(origin)
	if oi < 0 || st.Origins[oi].State == decide.Disabled || spec.Origins[oi].Level != st.Level {
		return nil // unknown (Disable says so), already disabled, or not on the current level
	}
	for i, o := range spec.Origins {
		if i != oi && o.Level == st.Level && st.Origins[i].State != decide.Disabled {
			return nil
		}
	}
	// The way out is the nearest backup level with an enabled origin, else
	// the nearest level above.
	next := 0
	for _, l := range spec.Levels {
		if l == st.Level || !levelHasEnabled(spec, st, l) {
			continue
		}
		if l > st.Level {
			next = l
			break
		}
		next = l // above the current level: the last one seen is the nearest
	}
	force := fmt.Sprintf("or force it with vigil origin disable -force %s %s (the API's ?force=true)", spec.Name, origin)
	hint := "the site has no other level with an enabled origin: enable one first, " + force
	if next != 0 {
		hint = fmt.Sprintf("move the site first with vigil switch %s %d, %s", spec.Name, next, force)
	}
	why := "the site would serve nothing until a round fails it over"
	if st.EnabledOrigins()-1 < 2 {
		why = "the site would serve nothing, and with fewer than two enabled origins its health checks pause, so nothing would move it"
	}
	return &ActionError{Code: "last_enabled_origin", Hint: hint, Err: fmt.Errorf(
		"site %s: %s is the last enabled origin of level %d, the current level: disabling it is refused, as %s", spec.Name, origin, st.Level, why)}
}

func levelHasEnabled(spec *decide.SiteSpec, st *decide.SiteState, level int) bool {
	for i, o := range spec.Origins {
		if o.Level == level && st.Origins[i].State != decide.Disabled {
			return true
		}
	}
	return false
}

// Enable puts a disabled origin back, unknown.
func (e *Engine) Enable(ctx context.Context, site, origin, actor string) ([]decide.Event, error) {
	return e.act(ctx, site, actor, func(f *fleet.Fleet) ([]decide.Event, error) { return f.Enable(site, origin) })
}

// Events reads the journal.
func (e *Engine) Events(ctx context.Context, after uint64, site string, limit int) ([]store.Event, error) {
	return e.store.Events(ctx, after, site, limit)
}

// Reload applies a new configuration: sources whose block changed are
// restarted, sites keep their state (see restore). When the new
// configuration or one of its sources fails, nothing changes and the
// diagnostics say why. New sources start without the engine's lock, so
// rounds and actions go on meanwhile; a round in progress when the new
// configuration is installed is discarded.
func (e *Engine) Reload(ctx context.Context, cfg *config.Config) hcl.Diagnostics {
	e.mu.Lock()
	oldSet := e.set
	e.mu.Unlock()
	set, diags := oldSet.Next(ctx, cfg, e.newSource(cfg.Control.PluginDir))
	if diags.HasErrors() {
		return diags
	}
	e.mu.Lock()
	e.takeLoadsLocked(ctx) // claimed sites carry over as stored (claim.go)
	old, oldInfo, oldLast := e.fleet, e.info, e.last
	oldChain := configChain(old) // without the drill's link (drill.go)
	sameChain := len(oldChain) == len(cfg.Sources)
	for k, c := range oldChain {
		sameChain = sameChain && c.Name == cfg.Sources[k].Name
	}
	recordOf := func(name string) (store.Site, bool) {
		i := old.SiteIndex(name)
		if i < 0 {
			return store.Site{}, false
		}
		return record(old.Sites[i], &oldInfo[i]), true
	}
	carry := func(name string) lastRef {
		i := old.SiteIndex(name)
		if i < 0 || !sameChain {
			return lastRef{}
		}
		// The record's layout is the old site's origins: keep it only
		// when they are the same.
		if n := cfg.Site(name); n == nil || !sameOrigins(old.Sites[i], n) {
			return lastRef{}
		}
		return oldLast[i]
	}
	closing := e.set
	// A site the memory holds but a failed commit did not write stays owed:
	// its record, rebuilt from memory, matches memory, so nothing else
	// would mark it.
	owed := e.owed(func(name string) bool { return cfg.Site(name) != nil })
	e.install(cfg, recordOf, carry)
	e.reowe(owed)
	for _, s := range old.Sites {
		if cfg.Site(s.Spec.Name) == nil {
			e.deleted = append(e.deleted, s.Spec.Name)
		}
	}
	e.set, e.sources = set, set.Members()
	e.setSourceStats()
	e.settleLocked(ctx)
	e.mu.Unlock()
	closing.Retire(set)
	e.log.Debug("new sources and sites installed", "sources", len(cfg.Sources), "sites", len(cfg.Sites))
	return diags
}

func sameOrigins(s *fleet.Site, c *config.Site) bool {
	if len(s.Spec.Origins) != len(c.Origins) {
		return false
	}
	for i, o := range s.Spec.Origins {
		if o.Name != c.Origins[i].Name {
			return false
		}
	}
	return true
}
