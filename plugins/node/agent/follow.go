package agent

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// follow long-polls the control plane's publication and applies every new
// snapshot: saved in the state directory first, then served. While the
// control plane cannot be reached, the last snapshot stays in use and the
// agent retries with backoff and jitter (newBackOff), from MinBackoff again
// after each snapshot.
func (a *Agent) follow(ctx context.Context) {
	f := &publication.Follower{BaseURL: a.cfg.ControlPlane, Token: a.cfg.ControlPlaneToken, Wait: a.cfg.PollWait}
	b := a.backOff()
	failing := false
	for ctx.Err() == nil {
		after := uint64(0)
		if cur := a.current.Load(); cur != nil {
			after = cur.Version
		}
		snap, err := f.Next(ctx, after)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, publication.ErrNotModified):
			continue
		case err != nil:
			a.metrics.followErrors.Inc()
			if !failing {
				if after == 0 {
					a.log.Warn("control plane unreachable and no saved publication: the proxy answers 503 until it is reached", "error", err)
				} else {
					a.log.Warn("control plane unreachable: serving the last publication", "version", after, "error", err)
				}
				failing = true
			} else {
				a.log.Debug("control plane still unreachable", "error", err)
			}
			if !sleepUntil(ctx, time.Now().Add(b.NextBackOff())) {
				return
			}
			continue
		}
		if failing {
			a.log.Info("control plane reachable again")
			failing = false
		}
		b.Reset()
		a.apply(snap, true)
	}
}

// apply makes snap the current publication; with save it then writes it
// to the state directory. Serving comes first so that a switch takes effect
// without waiting for the disk; a crash in between only means the restarted
// node serves the previous snapshot until the control plane answers.
func (a *Agent) apply(snap *publication.Snapshot, save bool) {
	a.current.Store(snap)
	if a.proxy != nil {
		a.proxy.SetSnapshot(snap)
	}
	if a.passive != nil {
		a.passive.serve(served(snap))
		a.heldChanged()
	}
	if a.edge != nil {
		a.edge.SetSnapshot(snap)
	}
	a.metrics.version.Set(float64(snap.Version))
	a.event(Event{Kind: EventPublication, Version: snap.Version})
	if save && a.cfg.StateDir != "" {
		if err := SaveSnapshot(a.cfg.StateDir, snap); err != nil {
			a.log.Error("publication not saved; it is served but would be lost at a restart", "version", snap.Version, "error", err)
		}
	}
	a.log.Info("publication applied", "version", snap.Version, "sites", len(snap.Sites))
}

// served returns the origins snap serves, by address, with the hostnames
// of the sites serving each: every site's current level's origins, during
// a failback ramp the level being left's (which still serves part of the
// requests), and the backup level's (which the proxy falls back to when
// the current level fails a request): their passive windows stay live.
func served(snap *publication.Snapshot) map[string][]string {
	live := map[string][]string{}
	add := func(host string, origins []publication.Origin) {
		for _, o := range origins {
			if !slices.Contains(live[o.Address], host) {
				live[o.Address] = append(live[o.Address], host)
			}
		}
	}
	for _, s := range snap.Sites {
		add(s.Hostname, s.Origins)
		if s.Ramp != nil {
			add(s.Hostname, s.Ramp.FromOrigins)
		}
		if s.Backup != nil {
			add(s.Hostname, s.Backup.Origins)
		}
	}
	return live
}
