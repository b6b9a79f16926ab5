package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/store"
)

// ActionError is an operator action refused for a reason the operator can
// fix (unknown site, origin or level).
type ActionError struct {
	Err error
	// Code is "unknown_site", "unknown_level" or "unknown_origin".
	Code string
	Hint string
}

func (e *ActionError) Error() string { return e.Err.Error() }
func (e *ActionError) Unwrap() error { return e.Err }

func (e *Engine) act(ctx context.Context, site, actor string, do func(f *fleet.Fleet) ([]decide.Event, error)) ([]decide.Event, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.active() || (e.opts.Owns != nil && e.fleet.Site(site) != nil && !e.opts.Owns(site)) {
		return nil, fmt.Errorf("site %s: %w", site, ErrNotActive)
	}
	events, err := do(e.fleet)
	if err != nil {
		ae := &ActionError{Err: err, Code: "unknown_origin"}
		var ul *decide.UnknownLevelError
		var us fleet.ErrUnknownSite
		switch {
		case errors.As(err, &ul):
			ae.Code, ae.Hint = "unknown_level", ul.Hint()
		case errors.As(err, &us):
			ae.Code = "unknown_site"
		}
		return nil, ae
	}
	s := e.fleet.Site(site)
	x := e.extra(site)
	now := e.opts.Now()
	for _, ev := range events {
		if ev.Kind == decide.KindOriginState {
			ox := x.origin(ev.Origin)
			ox.since = now
			ox.votes = nil
			if ev.To == decide.Disabled {
				ox.disabledBy = "operator"
				ox.reason = "disabled by " + actor
			} else {
				ox.disabledBy = ""
				ox.reason = "enabled by " + actor + "; not probed since"
			}
		}
		e.addEvent(site, 0, actor, ev)
	}
	decide.LevelHealth(s.Spec, s.State, s.Levels)
	e.dirty[site] = true
	e.observeSite(s)
	e.republish()
	if !e.commitLocked(ctx) {
		// The action is applied in memory and will be saved with the
		// next commit; say so rather than pretend it is durable.
		e.log.Warn("operator action applied but not yet saved", "site", site, "actor", actor)
	}
	e.refreshViews([]string{site})
	if events == nil {
		events = []decide.Event{}
	}
	return events, nil
}

// Switch is the operator's manual switch of site to level.
func (e *Engine) Switch(ctx context.Context, site string, level int, actor string) ([]decide.Event, error) {
	return e.act(ctx, site, actor, func(f *fleet.Fleet) ([]decide.Event, error) { return f.Switch(site, level) })
}

// Disable takes an origin out of votes, level health and the publication.
func (e *Engine) Disable(ctx context.Context, site, origin, actor string) ([]decide.Event, error) {
	return e.act(ctx, site, actor, func(f *fleet.Fleet) ([]decide.Event, error) { return f.Disable(site, origin) })
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
// diagnostics say why.
func (e *Engine) Reload(ctx context.Context, cfg *config.Config) hcl.Diagnostics {
	e.mu.Lock()
	oldSources, oldKeys := e.sources, e.sourceKeys
	e.mu.Unlock()
	sources, keys, diags := e.startSources(ctx, cfg, oldSources, oldKeys)
	if diags.HasErrors() {
		return diags
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	records := map[string]store.Site{}
	for _, s := range e.fleet.Sites {
		records[s.Spec.Name] = record(s, e.extra(s.Spec.Name))
	}
	e.install(cfg, records, e.extras)
	for _, old := range e.sources {
		if !isOld(old, sources) {
			old.Close()
		}
	}
	e.sources, e.sourceKeys = sources, keys
	e.setSourceStats()
	e.commitLocked(ctx)
	e.log.Info("configuration reloaded", "sources", len(cfg.Sources), "sites", len(cfg.Sites))
	return diags
}
