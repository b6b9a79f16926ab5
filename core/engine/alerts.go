package engine

import (
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
)

// AlertingSite is a site in some state worth an alert: off its top level,
// every level unhealthy, a manual failback waiting, or an origin
// unhealthy.
type AlertingSite struct {
	Site            string
	Level, TopLevel int
	AllUnhealthy    bool
	// FailbackLevel is the healthy level above Level that failback would
	// go to, while failback is manual (configured or held); 0 for none.
	FailbackLevel int
	ManualHold    bool
	Unhealthy     []AlertingOrigin
	// Flapping are the origins held out as flapping (docs/antiflap.md).
	Flapping []AlertingOrigin
	// Drill is set while a failover drill runs on the site or the site is
	// on its way back from one (docs/drills.md).
	Drill bool
}

// allUnhealthy reports whether every level of the site is unhealthy.
func (snap *siteSnap) allUnhealthy() bool {
	for _, h := range snap.levels {
		if h != decide.Unhealthy {
			return false
		}
	}
	return len(snap.levels) > 0
}

// failbackWaiting is the healthy level above the current one that a
// manual failback (configured, or a manual hold) waits for an operator to
// switch to, as the failback_available notice says; 0 for none.
func (snap *siteSnap) failbackWaiting(spec *decide.SiteSpec) int {
	if decide.EffectiveFailback(spec, &decide.SiteState{ManualHold: snap.hold}) != decide.FailbackManual {
		return 0
	}
	cur := spec.LevelIndex(snap.level)
	for li := 0; li < cur && li < len(snap.levels); li++ {
		if snap.levels[li] == decide.Healthy {
			return spec.Levels[li]
		}
	}
	return 0
}

// AlertingOrigin is an unhealthy origin.
type AlertingOrigin struct {
	Name  string
	Level int
	Since time.Time
}

// Alerting calls yield for each site in an alerting state, in name order,
// from the read-side copies (no lock, and nothing for the sites that are
// well).
func (v *Views) Alerting(yield func(AlertingSite)) {
	for i, snap := range v.sites {
		spec := v.fleet.Sites[i].Spec
		a := AlertingSite{Site: spec.Name, Level: snap.level, TopLevel: spec.TopLevel(), ManualHold: snap.hold,
			AllUnhealthy: snap.allUnhealthy(), FailbackLevel: snap.failbackWaiting(spec), Drill: snap.drill != nil}
		for oi, o := range snap.origins {
			if o.state == decide.Unhealthy {
				u := AlertingOrigin{Name: spec.Origins[oi].Name, Level: spec.Origins[oi].Level}
				if o.since != 0 {
					u.Since = timeOf(o.since)
				}
				a.Unhealthy = append(a.Unhealthy, u)
			}
		}
		if snap.af != nil {
			for oi, o := range snap.af.origins {
				if o.held {
					f := AlertingOrigin{Name: spec.Origins[oi].Name, Level: spec.Origins[oi].Level}
					if o.since != 0 {
						f.Since = fleet.TickTime(o.since)
					}
					a.Flapping = append(a.Flapping, f)
				}
			}
		}
		if a.Level != a.TopLevel || a.AllUnhealthy || a.FailbackLevel != 0 || len(a.Unhealthy) > 0 || len(a.Flapping) > 0 {
			yield(a)
		}
	}
}
