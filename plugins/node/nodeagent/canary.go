package nodeagent

import (
	"context"
	"net/url"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/sdk/probe"
)

// Canaries: the requests a node sends by itself to an origin whose passive
// window is held (see passive.serve), so that real traffic, not the green
// health path alone, proves a recovery before the origin serves again.
const (
	// DefaultCanaryInterval is the time between two canaries of a held
	// window when Config does not say.
	DefaultCanaryInterval = 5 * time.Second
	// NoCanaries in Config.CanaryInterval sends none: a held window that
	// failed then keeps voting down until its origin is served again (a
	// manual switch) or leaves the configuration.
	NoCanaries = time.Duration(-1)
	// CanaryPath is the path a canary asks for when no GET or HEAD request
	// failed on the origin's path (see window.notePath).
	CanaryPath = "/"
	// CanaryUserAgent is a canary's User-Agent.
	CanaryUserAgent = "vigil-node-canary/" + Version
	// canaryTimeout bounds one canary, as a probe's default timeout.
	canaryTimeout = probe.DefaultTimeout
	// canariesInFlight bounds the canaries of one tick in flight at once.
	canariesInFlight = 64
	// heldRecheck is how often, while windows are held, the configuration
	// is read to forget those whose origin left it: GET /v1/sites lists
	// every site, too much to read at every publication of a large fleet.
	heldRecheck = time.Minute
	// topologyTimeout bounds one read of the configuration.
	topologyTimeout = 10 * time.Second
)

// heldChanged says a publication was applied: the held windows are saved
// soon if it changed them (non-blocking).
func (a *Agent) heldChanged() {
	select {
	case a.published <- struct{}{}:
	default:
	}
}

// watchHeld runs until ctx ends: every Config.CanaryInterval it sends one
// canary to each held window's origin, every heldRecheck it forgets the
// held windows whose origin left the configuration, and whenever the held
// windows changed it saves them in the state directory.
func (a *Agent) watchHeld(ctx context.Context) {
	var tick <-chan time.Time
	if a.cfg.CanaryInterval > 0 {
		t := time.NewTicker(a.cfg.CanaryInterval)
		defer t.Stop()
		tick = t.C
	}
	recheck := time.NewTicker(heldRecheck)
	defer recheck.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			a.canaryRound(ctx)
		case <-a.published:
		case <-recheck.C:
			a.pruneHeld(ctx)
		}
		a.metrics.held.Set(float64(a.passive.held()))
		a.saveHeld()
	}
}

// saveHeld writes the held windows to the state directory when they
// changed since the last save, so that a restarted node keeps holding
// its failed origins down. A failure is logged and tried again at the
// loop's next wake-up.
func (a *Agent) saveHeld() {
	if a.cfg.StateDir == "" || a.passive.heldGen() == a.heldSaved {
		return
	}
	held, gen := a.passive.heldState()
	if err := saveHeld(a.cfg.StateDir, held); err != nil {
		a.log.Error("held passive windows not saved; a restart would forget them", "error", err)
		return
	}
	a.heldSaved = gen
}

// canaryRound sends one canary to the origin of every held window, at most
// canariesInFlight at once, and records their outcomes.
func (a *Agent) canaryRound(ctx context.Context) {
	var g errgroup.Group
	g.SetLimit(canariesInFlight)
	for _, c := range a.passive.canaryTargets() {
		g.Go(func() error {
			a.canary(ctx, c)
			return nil
		})
	}
	_ = g.Wait() // every func returns nil
}

// canary sends one canary to c's origin: a GET of c.path (a path that
// failed there, or CanaryPath) with the site's Host, no query, cookie or
// credentials, and records the outcome in the held window as a request of
// real traffic would be.
func (a *Agent) canary(ctx context.Context, c canaryTarget) {
	path := CanaryPath
	if c.path != "" {
		path = (&url.URL{Path: c.path}).EscapedPath()
	}
	res, err := a.canaryProbe(ctx, probe.Request{Address: c.address, Host: c.host, Path: path, Timeout: canaryTimeout,
		UserAgent: CanaryUserAgent, RootCAs: a.probeRootCAs()})
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		a.metrics.canaries.WithLabelValues("invalid").Inc()
		a.log.Warn("canary not sent", "origin", c.address, "host", c.host, "error", err)
		return
	}
	at := proxy.Attempt{Address: c.address, Status: res.Status, Latency: res.Latency}
	if res.Status == 0 {
		at.Err = "connect_error"
		if res.Reason == probe.Timeout {
			at.Err = "timeout"
		}
	}
	label := "ok"
	switch k := a.passive.kind(at); {
	case failed(k):
		label = "failed"
	case k == kindIgnored:
		label = "ignored"
	}
	a.metrics.canaries.WithLabelValues(label).Inc()
	if a.passive.canaried(at) {
		a.log.Info("canaries succeeded: the origin's held passive window is cleared, its recovery is up to the probes again",
			"origin", c.address, "host", c.host, "in_a_row", CanarySuccesses)
	} else if label == "failed" {
		a.log.Debug("canary failed: the origin's passive window stays held", "origin", c.address, "host", c.host, "status", res.Status, "detail", res.Detail)
	}
}

// pruneHeld forgets the held windows whose origin is no longer configured
// (an enabled origin of any level of any site, as GET /v1/sites lists
// them). Without a control plane, or when it cannot be read, nothing is
// forgotten.
func (a *Agent) pruneHeld(ctx context.Context) {
	if a.cp == nil || a.passive.held() == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, topologyTimeout)
	defer cancel()
	topo, err := edge.FetchTopology(ctx, a.cp.client, a.cp.list(), a.cfg.ControlPlaneToken)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Debug("held passive windows not checked against the configuration; kept", "error", err)
		}
		return
	}
	configured := map[string]bool{}
	for _, origins := range topo {
		for _, o := range origins {
			configured[o.Address] = true
		}
	}
	for _, addr := range a.passive.forget(configured) {
		a.log.Info("held passive window forgotten: its origin left the configuration", "origin", addr)
	}
}
