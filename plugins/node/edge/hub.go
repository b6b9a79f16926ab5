package edge

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// Driver applies Views to one edge.
type Driver interface {
	// Name names the edge in logs and metrics ("haproxy", "template:nginx").
	Name() string
	// Apply makes the edge serve v. It is called from one goroutine, with
	// the newest View; it must be idempotent (the same View is applied again
	// at every resync, and after an error). An error leaves the edge as it
	// was, or as close to it as the edge allows, and is retried.
	Apply(ctx context.Context, v *View) (Result, error)
}

// Watcher is implemented by a Driver that can tell when its edge lost what
// was applied: HAProxy reloaded or restarted drops the servers added at
// run time. The Hub runs Watch beside the driver for as long as it runs,
// and applies the newest View at once each time Watch calls changed,
// rather than at the next resync.
type Watcher interface {
	// Watch returns when ctx ends; changed may be called from any
	// goroutine and does not block.
	Watch(ctx context.Context, changed func())
}

// Result says what an Apply changed.
type Result struct {
	// Changes counts the edits made (runtime commands, files written).
	Changes int
	// Reloaded is true when the edge was reloaded.
	Reloaded bool
}

// RetryAt is the error of an Apply that has to wait (a reload within the
// minimum interval): the Hub applies the newest View again at At, without
// counting a failure.
type RetryAt struct {
	At     time.Time
	Reason string
}

func (e *RetryAt) Error() string {
	return e.Reason + "; next attempt at " + e.At.Format(time.RFC3339Nano)
}

// Defaults of HubOptions.
const (
	DefaultResync     = 30 * time.Second
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	topologyTimeout   = 10 * time.Second
)

// HubOptions configure a Hub.
type HubOptions struct {
	// Drivers are the edges; each runs in its own goroutine.
	Drivers []Driver
	// Prefix is put before every backend name.
	Prefix string
	// Vars are handed to templates as .Vars.
	Vars map[string]string
	// ControlPlane and Token, when set, fetch the topology (GET /v1/sites)
	// after each publication; empty: Views know the current level only.
	// ControlPlane may list a cluster's agents separated by commas
	// (FetchTopology).
	ControlPlane, Token string
	// Client, when set, is the HTTP client of those reads (the control
	// plane's CA and client certificate); default: a plain one.
	Client *http.Client
	// Resync re-applies the newest View this often (default 30s), so that an
	// edge restarted or edited by hand comes back to the publication. A
	// driver that is a Watcher (HAProxy) is re-applied as soon as it sees
	// its edge restart, without waiting for the resync.
	Resync time.Duration
	// MinBackoff and MaxBackoff bound the retries of a failing driver.
	MinBackoff, MaxBackoff time.Duration
	// Log receives what happens (default: nothing).
	Log hclog.Logger
	// Registerer receives the metrics (default: none).
	Registerer prometheus.Registerer
	// OnApplied, when set, is told of every apply of an edge that was
	// not deferred, on the edge's goroutine: it must be quick.
	// vigil-node acknowledges the versions its edges applied with it.
	OnApplied func(Applied)
}

// Applied is one edge's apply of a publication version: when it ended,
// and its error (nil when the edge took it).
type Applied struct {
	Edge    string
	Version uint64
	At      time.Time
	Err     error
}

// Hub hands each publication to the drivers.
type Hub struct {
	opts HubOptions
	m    *hubMetrics
	runs []*run

	mu       sync.Mutex
	snap     *publication.Snapshot
	topo     Topology
	view     *View
	topoWake chan struct{}
}

type run struct {
	d    Driver
	wake chan struct{}

	mu      sync.Mutex
	view    *View
	applied uint64
	err     error
}

// NewHub checks opts and returns a Hub; Run starts it.
func NewHub(opts HubOptions) (*Hub, error) {
	if len(opts.Drivers) == 0 {
		return nil, errors.New("edge: no driver")
	}
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	h := &Hub{opts: opts, m: newHubMetrics(), topoWake: make(chan struct{}, 1)}
	seen := map[string]bool{}
	for _, d := range opts.Drivers {
		if seen[d.Name()] {
			return nil, fmt.Errorf("edge: two drivers named %q", d.Name())
		}
		seen[d.Name()] = true
		h.runs = append(h.runs, &run{d: d, wake: make(chan struct{}, 1)})
	}
	if opts.Registerer != nil {
		if err := h.m.register(opts.Registerer); err != nil {
			return nil, fmt.Errorf("edge metrics: %w", err)
		}
	}
	return h, nil
}

// SetSnapshot hands snap to every driver (it does not wait for them).
func (h *Hub) SetSnapshot(snap *publication.Snapshot) {
	h.mu.Lock()
	h.snap = snap
	h.rebuildLocked()
	h.mu.Unlock()
	select {
	case h.topoWake <- struct{}{}:
	default:
	}
}

// rebuildLocked builds the View of the newest snapshot and topology, and
// wakes the drivers when it differs from the last one.
func (h *Hub) rebuildLocked() {
	if h.snap == nil {
		return
	}
	v, skipped := Build(h.snap, h.topo, h.opts.Prefix, h.opts.Vars)
	for _, s := range skipped {
		h.opts.Log.Warn("origin address unusable at the edge: left out", "origin", s)
	}
	if h.view != nil && reflect.DeepEqual(v, h.view) {
		return
	}
	h.view = v
	for _, r := range h.runs {
		r.mu.Lock()
		r.view = v
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// Status is one driver's state.
type Status struct {
	Edge string
	// Applied is the last publication version applied without error (0:
	// none yet).
	Applied uint64
	// Err is the last Apply's error (nil when it succeeded).
	Err error
}

// Status returns each driver's state, in the drivers' order.
func (h *Hub) Status() []Status {
	out := make([]Status, 0, len(h.runs))
	for _, r := range h.runs {
		r.mu.Lock()
		out = append(out, Status{Edge: r.d.Name(), Applied: r.applied, Err: r.err})
		r.mu.Unlock()
	}
	return out
}

// Run drives the edges until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range h.runs {
		wg.Go(func() { h.drive(ctx, r) })
		if w, ok := r.d.(Watcher); ok {
			name := r.d.Name()
			wg.Go(func() {
				w.Watch(ctx, func() {
					h.m.restarts.WithLabelValues(name).Inc()
					select {
					case r.wake <- struct{}{}:
					default:
					}
				})
			})
		}
	}
	if h.opts.ControlPlane != "" {
		wg.Go(func() { h.followTopology(ctx) })
	}
	wg.Wait()
}

// followTopology fetches the topology after each publication and rebuilds
// the View when it changed. A failure keeps the last topology (logged once
// until it works again).
func (h *Hub) followTopology(ctx context.Context) {
	client := h.opts.Client
	if client == nil {
		client = &http.Client{Timeout: topologyTimeout}
	}
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.topoWake:
		}
		t, err := FetchTopology(ctx, client, h.opts.ControlPlane, h.opts.Token)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !failing {
				h.opts.Log.Warn("the other levels are unknown until the control plane answers GET /v1/sites: backup servers stay as they were", "error", err)
			}
			failing = true
			continue
		}
		failing = false
		h.mu.Lock()
		h.topo = t
		h.rebuildLocked()
		h.mu.Unlock()
	}
}

func (h *Hub) drive(ctx context.Context, r *run) {
	name := r.d.Name()
	log := h.opts.Log.With("edge", name)
	backoff := h.opts.MinBackoff
	failures := 0
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
		r.mu.Lock()
		v := r.view
		r.mu.Unlock()
		if v == nil {
			continue
		}
		start := time.Now()
		res, err := r.d.Apply(ctx, v)
		if ctx.Err() != nil {
			return
		}
		h.m.seconds.WithLabelValues(name).Observe(time.Since(start).Seconds())
		var later *RetryAt
		next := h.opts.Resync
		switch {
		case errors.As(err, &later):
			h.m.applies.WithLabelValues(name, "deferred").Inc()
			log.Debug("apply deferred", "version", v.Version, "reason", later.Reason)
			next = max(time.Until(later.At), time.Millisecond)
		case err != nil:
			failures++
			h.m.applies.WithLabelValues(name, "error").Inc()
			next = backoff/2 + rand.N(backoff/2+1)
			backoff = min(backoff*2, h.opts.MaxBackoff)
			if failures == 1 {
				log.Error("the edge did not take the publication; it keeps its last good state, retrying", "version", v.Version, "error", err, "retry_in", next.Round(time.Millisecond).String())
			} else {
				log.Warn("the edge still does not take the publication", "version", v.Version, "failures", failures, "error", err, "retry_in", next.Round(time.Millisecond).String())
			}
		default:
			if failures > 0 {
				log.Info("the edge took the publication again", "version", v.Version, "after_failures", failures)
			}
			failures, backoff = 0, h.opts.MinBackoff
			h.m.applies.WithLabelValues(name, "ok").Inc()
			h.m.version.WithLabelValues(name).Set(float64(v.Version))
			if res.Reloaded {
				h.m.reloads.WithLabelValues(name).Inc()
			}
			if res.Changes > 0 || res.Reloaded {
				log.Info("publication applied at the edge", "version", v.Version, "changes", res.Changes, "reloaded", res.Reloaded, "took", time.Since(start).String())
			}
		}
		if h.opts.OnApplied != nil && later == nil {
			h.opts.OnApplied(Applied{Edge: name, Version: v.Version, At: time.Now(), Err: err})
		}
		r.mu.Lock()
		if err == nil {
			r.applied = v.Version
		}
		if later == nil {
			r.err = err
		}
		r.mu.Unlock()
		timer.Reset(next)
	}
}

type hubMetrics struct {
	applies *prometheus.CounterVec
	version *prometheus.GaugeVec
	reloads *prometheus.CounterVec
	seconds *prometheus.HistogramVec
	// restarts counts the new edge processes a Watcher saw.
	restarts *prometheus.CounterVec
}

func newHubMetrics() *hubMetrics {
	return &hubMetrics{
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vigil_node_edge_applies_total",
			Help: "Publications applied to an edge (haproxy, template:NAME), by result: ok, error (retried with backoff), deferred (a reload within the minimum interval)."}, []string{"edge", "result"}),
		version: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vigil_node_edge_applied_version",
			Help: "The last publication version an edge took without error."}, []string{"edge"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vigil_node_edge_reloads_total",
			Help: "Reloads of an edge (a template's reload command, or HAProxy's fallback)."}, []string{"edge"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vigil_node_edge_restarts_total",
			Help: "New processes of an edge (HAProxy reloaded or restarted) that vigil-node saw and applied the publication to at once."}, []string{"edge"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vigil_node_edge_apply_seconds",
			Help: "Time to apply a publication to an edge, check and reload included.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9)}, []string{"edge"}),
	}
}

func (m *hubMetrics) register(r prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{m.applies, m.version, m.reloads, m.seconds, m.restarts} {
		errs = append(errs, r.Register(c))
	}
	return errors.Join(errs...)
}
