package nodeagent

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
//
// With several control planes (a cluster), it follows the one that leads
// (controlPlanes.pick), asks again which one leads after every wait that
// brought nothing new and after every failure, and then moves at once to
// another one that answers: a standby mirrors the leader's publication,
// and becomes the leader's source when it takes over. It sleeps only when
// every listed control plane failed in a row.
//
// Versions never go back: the version is the cluster's (stored with the
// state, continued by a new leader), so an answer older than the one
// served comes from an instance that has not caught up, and is refused,
// unless that instance is a lone control plane or the acting leader
// (controlPlanes.mayGoBack): then its store's history restarted, and its
// snapshot is the truth.
func (a *Agent) follow(ctx context.Context) {
	cp := a.cp
	multi := len(cp.urls) > 1
	b := a.backOff()
	failing := false
	target, rediscover := cp.urls[0], multi
	misses := 0   // failures in a row
	greeted := "" // the control plane last told of the version served (acks.hello)
	for ctx.Err() == nil {
		if rediscover {
			rediscover = false
			avoid := ""
			if misses > 0 {
				avoid = target
			}
			switch u, errs := cp.pick(ctx, avoid); {
			case ctx.Err() != nil:
				return
			case u == "":
				a.log.Debug("no control plane answered GET /v1/cluster", "error", errors.Join(errs...))
			case u != target:
				a.log.Info("following the publication of another control plane", "control_plane", u, "was", target)
				a.metrics.cpSwitches.Inc()
				target = u
				cp.following.Store(&u)
			}
		}
		after := uint64(0)
		if cur := a.current.Load(); cur != nil {
			after = cur.Version
		}
		if target != greeted || failing {
			a.acks.hello(target, a.current.Load(), failing) // applied.go
			greeted = target
		}
		f := &publication.Follower{BaseURL: target, Token: a.cfg.ControlPlaneToken, Wait: a.cfg.PollWait, Client: cp.client}
		snap, err := f.Next(ctx, after)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, publication.ErrNotModified):
			// It answered: nothing to avoid at the next pick.
			if failing {
				a.log.Info("control plane reachable again", "control_plane", target)
				failing = false
			}
			misses = 0
			b.Reset()
			rediscover = multi
			continue
		case err != nil:
			err = explainStatus(err)
			a.metrics.followErrors.Inc()
			misses++
			if !failing {
				if after == 0 {
					a.log.Warn("control plane unreachable and no saved publication: the proxy answers 503 until it is reached", "control_plane", target, "error", err)
				} else {
					a.log.Warn("control plane unreachable: serving the last publication", "control_plane", target, "version", after, "error", err)
				}
				failing = true
			} else {
				a.log.Debug("control plane still unreachable", "control_plane", target, "error", err)
			}
			rediscover = multi
			if misses >= len(cp.urls) {
				misses = 0
				if !sleepUntil(ctx, time.Now().Add(b.NextBackOff())) {
					return
				}
			}
			continue
		}
		if snap.Version < after {
			ok, why := cp.mayGoBack(ctx, target)
			if !ok {
				a.metrics.refused.Inc()
				a.log.Warn("refused an older publication: this node never goes back to an older version of the cluster's publication", "control_plane", target,
					"offered", snap.Version, "served", after, "because", why)
				rediscover, misses = multi, misses+1
				if !sleepUntil(ctx, time.Now().Add(b.NextBackOff())) {
					return
				}
				continue
			}
			a.log.Warn("following the control plane's publication back to an older version", "control_plane", target, "version", snap.Version, "served", after, "because", why)
		}
		if failing {
			a.log.Info("control plane reachable again", "control_plane", target)
			failing = false
		}
		misses = 0
		b.Reset()
		a.applyFollowed(target, snap) // applied.go
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
