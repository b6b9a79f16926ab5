package agent

import (
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/store"
)

// newControl makes the control plane's own alert conditions (the state
// not saved, the store on its space reserve) and registers
// vigil_commit_failures_total. The Alertmanager notifiers post them
// without the journal, so they go out when nothing can be saved.
func (a *Agent) newControl(cfg *config.Config) *notify.Control {
	opts := notify.ControlOptions{Logger: a.log.Named("store")}
	if cfg.Control.Store == nil {
		opts.DataDir = cfg.Control.DataDir
	}
	c := notify.NewControl(opts)
	a.reg.MustRegister(c.Collectors()...)
	return c
}

// watchCommits tells the control alerts of every failed commit (beside
// the cluster's own hook, if any). Commits that succeed are told by
// commitsSaved, an observer.
func (a *Agent) watchCommits(o *engine.Options) {
	next := o.OnCommitError
	o.OnCommitError = func(err error) {
		a.control.CommitFailed(err)
		if next != nil {
			next(err)
		}
	}
}

// commitsSaved is the observer that resolves VigilStateNotSaved at the
// first commit that succeeds.
func (a *Agent) commitsSaved() engine.Observer {
	return engine.ObserverFunc(func(engine.Commit) { a.control.CommitSaved() })
}

// onReserve is the bbolt store's OnReserve: logged, and
// VigilStoreOnReserve fires while the reserve is in use.
func (a *Agent) onReserve(e store.ReserveEvent) {
	a.logReserve(e)
	switch {
	case e.Released:
		a.control.ReserveReleased(e.Size)
	case e.Restored:
		a.control.ReserveRestored()
	}
}

// notifyOptions are the dispatcher's options: the alert states come from
// the engine's read side and from the control alerts, and alerts link to
// the status page at the API's address.
func (a *Agent) notifyOptions(eng *engine.Engine) []notify.Option {
	return []notify.Option{
		notify.WithControl(a.control),
		notify.WithAlertStates(func(yield func(notify.SiteAlerts)) {
			eng.Views().Alerting(func(s engine.AlertingSite) {
				out := notify.SiteAlerts{Site: s.Site, Level: s.Level, TopLevel: s.TopLevel, AllUnhealthy: s.AllUnhealthy,
					FailbackLevel: s.FailbackLevel, ManualHold: s.ManualHold, Drill: s.Drill}
				for _, o := range s.Unhealthy {
					out.Unhealthy = append(out.Unhealthy, notify.UnhealthyOrigin{Name: o.Name, Level: o.Level, Since: o.Since})
				}
				for _, o := range s.Flapping {
					out.Flapping = append(out.Flapping, notify.UnhealthyOrigin{Name: o.Name, Level: o.Level, Since: o.Since})
				}
				yield(out)
			})
		}),
		notify.WithExternalURL(func() string {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.listener == nil {
				return ""
			}
			return a.tls.scheme() + "://" + a.listener.Addr().String()
		}),
	}
}
