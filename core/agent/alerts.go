package agent

import (
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/notify"
)

// notifyOptions are the dispatcher's options: the alert states come from
// the engine's read side, and alerts link to the status page at the API's
// address.
func (a *Agent) notifyOptions(eng *engine.Engine) []notify.Option {
	return []notify.Option{
		notify.WithAlertStates(func(yield func(notify.SiteAlerts)) {
			eng.Views().Alerting(func(s engine.AlertingSite) {
				out := notify.SiteAlerts{Site: s.Site, Level: s.Level, TopLevel: s.TopLevel, AllUnhealthy: s.AllUnhealthy,
					FailbackLevel: s.FailbackLevel, ManualHold: s.ManualHold}
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
