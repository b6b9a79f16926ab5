package nodeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/credentials"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/probe"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// Version is the agent's version, sent to the gateway.
const Version = "0.1.0"

// Defaults of Config.
const (
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// DefaultConcurrency is the most probes in flight at once when Config
	// does not say: every job of a batch may be in flight (a black-holed
	// origin costs a socket and a goroutine while it waits, nothing more),
	// up to this and the open-file limit.
	DefaultConcurrency = 4096
	// DefaultSpread is the part of a batch's time over which its probes'
	// starts are spread when Config does not say, so that a fleet of nodes
	// does not hit the origins in one burst.
	DefaultSpread = 0.1
)

// Bounds of Config.
const (
	// MaxConcurrency bounds Config.Concurrency.
	MaxConcurrency = 100000
	// MaxSpread bounds Config.Spread: at least half of a batch's time is
	// left for the probes to end.
	MaxSpread = 0.5
	// NoSpread in Config.Spread starts every probe of a batch at once.
	NoSpread = -1.0
)

// fdReserve is how many file descriptors the agent keeps for itself (its
// gateway link, the control plane, logs, DNS) beside the probes'.
const fdReserve = 64

// fdLimit is the process's open-file limit, 0 when unknown; tests replace it.
var fdLimit = openFileLimit

// Config is an agent's configuration; the vigil-node flags fill it.
type Config struct {
	// Gateway is the vigil-source-node address (host:port), or the
	// addresses of a cluster's gateways separated by commas (the node
	// attaches to every one: the leader's sends it probes, and in sharded
	// mode each shard's sends those of its own sites); empty: the node does
	// not probe.
	Gateway string
	// ID is the node's id, its voter id in votes.
	ID string
	// Labels describe the node (region, provider...) for site_labels.
	Labels map[string]string
	// Token is the shared gateway token ("" with mTLS only).
	Token string
	// GatewayTLS, when not nil, turns TLS on for the gateway link (with a
	// client certificate for mTLS).
	GatewayTLS *tls.Config

	// ControlPlane is the vigil API base URL, or the URLs of a cluster's
	// agents separated by commas (the node follows the one that leads, see
	// follow); empty: no publication.
	ControlPlane string
	// ControlPlaneTLS, when not nil, is the TLS configuration of https
	// control planes: the CA trusted (-control-plane-ca) and a client
	// certificate (-control-plane-cert). Used by the publication's
	// follower, the topology's reads and the held windows' check.
	ControlPlaneTLS *tls.Config
	// ControlPlaneToken is the API bearer token, if the API needs one.
	ControlPlaneToken string
	// PollWait is the long-poll wait (default 30s).
	PollWait time.Duration
	// StateDir keeps the last publication; empty: none kept.
	StateDir string

	// ProxyListen is the visitor listener (host:port); empty: no proxy.
	ProxyListen string
	// Proxy tunes the proxy.
	Proxy proxy.Options
	// Passive tunes the passive windows of the proxy's traffic, kept when
	// the node both proxies and probes, and sent to a gateway announcing the
	// "passive" feature.
	Passive PassiveConfig
	// PassiveFrom lists what feeds the passive windows (ParsePassiveFrom):
	// PassiveFromProxy, PassiveFromHAProxy (the *edge.HAProxy of Edges),
	// PassiveFromNginxLog+PATH; empty, not nil: nothing. Nil: the proxy
	// when the node proxies, and the HAProxy it drives, if any. The windows
	// exist only when the node also probes (Gateway).
	PassiveFrom []string
	// PassiveInterval is how often HAProxy's counters and the access logs
	// are read (0: DefaultPassiveInterval).
	PassiveInterval time.Duration
	// CanaryInterval is the time between two canaries of a held passive
	// window, the requests the node sends by itself to an origin whose
	// real traffic failed before it stopped serving it (0:
	// DefaultCanaryInterval; NoCanaries: none). See canary.go.
	CanaryInterval time.Duration
	// MetricsListen serves /metrics, /healthz and /readyz (host:port);
	// empty: none.
	MetricsListen string
	// Build is the node's build, the labels of vigil_node_build_info.
	Build Build
	// DrainTimeout bounds how long Run waits, once its context ends, for
	// the proxy's requests in flight to end before it closes their
	// connections (0: DefaultDrainTimeout; NoDrain: none waited for).
	DrainTimeout time.Duration

	// Edges are the edge software the node drives from each publication
	// (HAProxy's runtime API, templates); empty: none.
	Edges []edge.Driver
	// Edge tunes the edge hub (its Drivers, ControlPlane, Token, Log and
	// Registerer are filled from this Config).
	Edge edge.HubOptions

	// Concurrency bounds the probes in flight at once, over every batch
	// (0: DefaultConcurrency). It is lowered to what the open-file limit
	// allows: the limit less a reserve, and half of that when the proxy
	// runs, so that visitors keep their connections.
	Concurrency int
	// Spread is the part of a batch's time, from 0 to MaxSpread, over which
	// its probes start, in an order shuffled per batch, each at a jittered
	// time within its slot (0: DefaultSpread; NoSpread: all at once). The
	// spread always leaves the batch's longest probe timeout room to end.
	Spread float64
	// ProbeRootCAs verifies origins behind a private CA (nil: system roots).
	ProbeRootCAs *x509.CertPool
	// Prober runs one probe (default probe.Do); tests replace it.
	Prober func(context.Context, probe.Request) (probe.Result, error)
	// MinBackoff and MaxBackoff bound the reconnect backoff.
	MinBackoff, MaxBackoff time.Duration

	// Log is the agent's logger.
	Log hclog.Logger
	// OnEvent, when set, is called (synchronously) on every Event.
	OnEvent func(Event)
	// Registry receives the metrics (default: a new registry).
	Registry *prometheus.Registry
}

// EventKind says what happened.
type EventKind int

// The events an agent reports through Config.OnEvent.
const (
	// EventAttached: the gateway welcomed the node.
	EventAttached EventKind = iota + 1
	// EventDetached: the link is down (Err says why); a retry follows.
	EventDetached
	// EventRefused: the gateway refused the node (wrong token, duplicate
	// id, bad certificate); Err says why. A retry follows with backoff.
	EventRefused
	// EventPublication: a publication (Version) is being served.
	EventPublication
	// EventListening: the proxy listens (Addr).
	EventListening
)

// Event is something an agent reports.
type Event struct {
	Kind    EventKind
	Err     error
	Version uint64
	Addr    net.Addr
}

// Agent is a vigil-node agent.
type Agent struct {
	cfg Config
	log hclog.Logger
	// cp is the control planes (nil without Config.ControlPlane), gateways
	// the gateways' addresses (Config.Gateway split).
	cp       *controlPlanes
	gateways []string
	proxy    *proxy.Proxy
	edge     *edge.Hub
	passive  *passive // nil unless the node probes and something feeds it
	// haFeed and logFeeds are the HAProxy and the access logs read into
	// the passive windows (passive_haproxy.go, passive_accesslog.go).
	haFeed   statsReader
	logFeeds []string
	// acks acknowledges each applied version (nil without a control
	// plane; applied.go).
	acks *acks
	// published wakes watchHeld after a publication (capacity 1).
	published chan struct{}
	// canaryProbe sends one canary (default probe.Do); tests replace it.
	canaryProbe func(context.Context, probe.Request) (probe.Result, error)
	// heldSaved is the generation of the held windows last saved (or
	// restored) in the state directory; watchHeld's alone after Run starts.
	heldSaved uint64
	metrics   *agentMetrics
	current   atomic.Pointer[publication.Snapshot]
	// gatewayCreds is the gateway link's TLS credentials (nil without
	// Config.GatewayTLS), probeRoots the probes' roots
	// (Config.ProbeRootCAs): a reload replaces them (reload.go).
	gatewayCreds *swapCreds
	probeRoots   atomic.Pointer[x509.CertPool]
	// serving is set once every listener of Run listens.
	serving atomic.Bool
	// backOff gives each reconnect loop its wait policy (newBackOff within
	// MinBackoff and MaxBackoff); tests replace it.
	backOff func() backoff.BackOff

	// inFlight holds a token per probe in flight, over every batch; its
	// capacity is the most probes in flight (Concurrency within the
	// open-file limit).
	inFlight chan struct{}

	mu          sync.Mutex
	proxyAddr   net.Addr
	metricsAddr net.Addr
	// cut is the jobs the last batch did not run (by jobKey): the next
	// batch starts them first, so that no origin is cut twice in a row
	// while others are probed.
	cut map[string]bool
}

// New checks cfg and returns an agent; Run starts it.
func New(cfg Config) (*Agent, error) {
	if cfg.Gateway == "" && cfg.ControlPlane == "" {
		return nil, errors.New("nothing to do: give -gateway (to probe for vigil) and/or -control-plane (to follow the publication)")
	}
	var gateways, cps []string
	var err error
	if cfg.ControlPlane != "" {
		if cps, err = ParseControlPlanes(cfg.ControlPlane); err != nil {
			return nil, err
		}
	}
	if cfg.Gateway != "" {
		if !sdk.ValidVoter(cfg.ID) {
			return nil, fmt.Errorf("node id %q is invalid: give -id 1 to 128 letters, digits and ._:-@/ (it is the voter id in vigil's votes)", cfg.ID)
		}
		if gateways, err = ParseGateways(cfg.Gateway); err != nil {
			return nil, err
		}
		if cfg.Token == "" && (cfg.GatewayTLS == nil || len(cfg.GatewayTLS.Certificates) == 0 && cfg.GatewayTLS.GetClientCertificate == nil) {
			return nil, errors.New("no gateway credentials: give -token-env (a variable holding the gateway's token) or a client certificate (-tls-cert, -tls-key)")
		}
	}
	if cfg.ProxyListen != "" && cfg.ControlPlane == "" && cfg.StateDir == "" {
		return nil, errors.New("-proxy-listen needs a publication: give -control-plane (and -state-dir to survive its absence)")
	}
	if len(cfg.Edges) > 0 && cfg.ControlPlane == "" && cfg.StateDir == "" {
		return nil, errors.New("driving an edge needs a publication: give -control-plane (and -state-dir to survive its absence)")
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	switch {
	case cfg.Concurrency < 0 || cfg.Concurrency > MaxConcurrency:
		return nil, fmt.Errorf("-concurrency %d: use a whole number from 1 to %d (the most probes in flight at once), or leave it out for %d", cfg.Concurrency, MaxConcurrency, DefaultConcurrency)
	case cfg.Spread == NoSpread:
	case cfg.Spread < 0 || cfg.Spread > MaxSpread || math.IsNaN(cfg.Spread):
		return nil, fmt.Errorf("-spread %v: use a fraction from 0 (every probe of a batch at once) to %v (starts spread over half of the batch's time); 0.1 to 0.2 keeps a fleet of nodes from hitting origins in one burst", cfg.Spread, MaxSpread)
	case cfg.Spread == 0:
		cfg.Spread = DefaultSpread
	}
	inFlight := maxInFlight(cfg.Concurrency, fdLimit(), cfg.ProxyListen != "")
	if cfg.Concurrency > inFlight {
		cfg.Log.Warn("-concurrency is above what the open-file limit allows; probes beyond it would fail to connect, so it is lowered (raise the limit with ulimit -n or LimitNOFILE=)",
			"concurrency", cfg.Concurrency, "open_file_limit", fdLimit(), "used", inFlight)
	}
	if cfg.Prober == nil {
		cfg.Prober = probe.Do
	}
	switch {
	case cfg.CanaryInterval == NoCanaries:
	case cfg.CanaryInterval < 0:
		return nil, fmt.Errorf("-canary-interval %v: use a positive duration such as 5s, or 0 to send no canaries", cfg.CanaryInterval)
	case cfg.CanaryInterval == 0:
		cfg.CanaryInterval = DefaultCanaryInterval
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
		cfg.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	a := &Agent{cfg: cfg, log: cfg.Log, metrics: newAgentMetrics(), inFlight: make(chan struct{}, inFlight),
		published: make(chan struct{}, 1), canaryProbe: probe.Do,
		backOff: func() backoff.BackOff { return newBackOff(cfg.MinBackoff, cfg.MaxBackoff) }, gateways: gateways}
	a.probeRoots.Store(cfg.ProbeRootCAs)
	if cfg.GatewayTLS != nil {
		a.gatewayCreds = newSwapCreds(credentials.NewTLS(cfg.GatewayTLS))
	}
	switch {
	case cfg.DrainTimeout == NoDrain:
	case cfg.DrainTimeout < 0:
		return nil, fmt.Errorf("-drain-timeout %v: use a positive duration such as 10s, or 0 to close visitors' connections at once", cfg.DrainTimeout)
	case cfg.DrainTimeout == 0:
		a.cfg.DrainTimeout = DefaultDrainTimeout
	}
	if err := cfg.Registry.Register(buildInfo(cfg.Build)); err != nil {
		return nil, fmt.Errorf("agent metrics: %w", err)
	}
	if len(cps) > 0 {
		wait := cfg.PollWait
		if wait <= 0 {
			wait = 30 * time.Second
		}
		a.cp = newControlPlanes(cps, cfg.ControlPlaneToken, cfg.ControlPlaneTLS, wait)
	}
	if err := a.metrics.register(cfg.Registry); err != nil {
		return nil, fmt.Errorf("agent metrics: %w", err)
	}
	if len(cps) > 0 {
		a.acks = newAcks(nodeName(cfg.ID), cfg.ProxyListen != "", len(cfg.Edges), cfg.Log)
	}
	proxyFeeds, haFeed, logFeeds, err := passiveSources(cfg)
	if err != nil {
		return nil, err
	}
	if len(cfg.PassiveFrom) > 0 && cfg.Gateway == "" {
		return nil, errors.New("-passive-from needs -gateway: the passive windows are sent to the gateway beside the probes' results")
	}
	if cfg.PassiveInterval < 0 {
		return nil, fmt.Errorf("-passive-interval %v: give how often HAProxy's counters and access logs are read, e.g. 1s", cfg.PassiveInterval)
	} else if cfg.PassiveInterval == 0 {
		a.cfg.PassiveInterval = DefaultPassiveInterval
	}
	if cfg.Gateway != "" && (proxyFeeds || haFeed != nil || len(logFeeds) > 0) {
		pw, err := newPassive(cfg.Passive, cfg.Proxy.Now)
		if err != nil {
			return nil, err
		}
		a.passive, a.logFeeds = pw, logFeeds
		if haFeed != nil {
			a.haFeed = haFeed
		}
	}
	if cfg.ProxyListen != "" {
		opts := cfg.Proxy
		opts.Registerer = cfg.Registry
		if opts.Log == nil {
			opts.Log = cfg.Log.Named("proxy")
		}
		if a.passive != nil && proxyFeeds {
			opts.OnAttempt = a.passive.record
		}
		if k, record := a.acks, opts.OnAttempt; k != nil {
			opts.OnAttempt = func(at proxy.Attempt) {
				if record != nil {
					record(at)
				}
				k.attempt(at)
			}
		}
		p, err := proxy.New(opts)
		if err != nil {
			return nil, err
		}
		a.proxy = p
	}
	if len(cfg.Edges) > 0 {
		opts := cfg.Edge
		opts.Drivers, opts.ControlPlane, opts.Token, opts.Registerer = cfg.Edges, cfg.ControlPlane, cfg.ControlPlaneToken, cfg.Registry
		if a.cp != nil {
			// The edge's reads of GET /v1/sites ask the listed agents in
			// turn, each within topologyTimeout.
			opts.ControlPlane, opts.Client = a.cp.list(), &http.Client{Transport: a.cp.client.Transport, Timeout: topologyTimeout}
		}
		if opts.Log == nil {
			opts.Log = cfg.Log.Named("edge")
		}
		if k, told := a.acks, opts.OnApplied; k != nil {
			opts.OnApplied = func(r edge.Applied) {
				if told != nil {
					told(r)
				}
				k.edgeApplied(r)
			}
		}
		h, err := edge.NewHub(opts)
		if err != nil {
			return nil, err
		}
		a.edge = h
	}
	return a, nil
}

// maxInFlight is the most probes in flight: concurrency (0: the default),
// within the open-file limit fds (0: unknown) less a reserve, and half of
// what is left when the proxy also needs descriptors for its visitors.
func maxInFlight(concurrency, fds int, proxy bool) int {
	limit := DefaultConcurrency
	if concurrency > 0 {
		limit = concurrency
	}
	if fds > 0 {
		avail := fds - fdReserve
		if proxy {
			avail /= 2
		}
		limit = min(limit, avail)
	}
	return max(1, limit)
}

// MaxInFlight returns the most probes the agent has in flight at once:
// Config.Concurrency within the open-file limit.
func (a *Agent) MaxInFlight() int { return cap(a.inFlight) }

func (a *Agent) event(e Event) {
	if a.cfg.OnEvent != nil {
		a.cfg.OnEvent(e)
	}
}

// EdgeStatus returns each driven edge's state (nil without -haproxy-socket
// or -template).
func (a *Agent) EdgeStatus() []edge.Status {
	if a.edge == nil {
		return nil
	}
	return a.edge.Status()
}

// Snapshot returns the publication in use, or nil.
func (a *Agent) Snapshot() *publication.Snapshot { return a.current.Load() }

// ProxyAddr returns the proxy's listening address once it listens.
func (a *Agent) ProxyAddr() net.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.proxyAddr
}

// MetricsAddr returns the metrics listener's address once it listens.
func (a *Agent) MetricsAddr() net.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.metricsAddr
}

// Run runs the agent until ctx ends: it loads the saved publication,
// starts the listeners, follows the publication and attaches to the
// gateway. It returns an error only when it cannot start.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if a.passive != nil && a.cfg.StateDir != "" {
		held, err := loadHeld(a.cfg.StateDir)
		if err != nil {
			a.log.Error("held passive windows unusable; starting without them", "error", err)
		} else if n := a.passive.restore(held); n > 0 {
			a.log.Info("held passive windows restored: their origins stay down until canaries succeed", "windows", n)
		}
		_, a.heldSaved = a.passive.heldState()
	}
	if a.cfg.StateDir != "" {
		snap, err := LoadSnapshot(a.cfg.StateDir)
		if err != nil {
			a.log.Error("saved publication unusable; waiting for the control plane", "error", err)
		} else if snap != nil {
			a.log.Info("serving the saved publication until the control plane answers", "version", snap.Version)
			a.apply(snap, false)
		}
	}
	var servers []server
	serve := func(addr string, srv server, slot *net.Addr) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		servers = append(servers, srv)
		a.mu.Lock()
		*slot = ln.Addr()
		a.mu.Unlock()
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("listener stopped", "address", ln.Addr().String(), "error", err)
				cancel()
			}
		}()
		return nil
	}
	var proxySrv *proxy.Server
	defer func() {
		if proxySrv != nil {
			a.drain(proxySrv)
		}
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	if a.cfg.MetricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(a.cfg.Registry, promhttp.HandlerOpts{EnableOpenMetrics: true}))
		mux.HandleFunc("GET /healthz", a.healthz)
		mux.HandleFunc("GET /readyz", a.readyz)
		if err := serve(a.cfg.MetricsListen, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}, &a.metricsAddr); err != nil {
			return fmt.Errorf("metrics listener: %w (pick a free -metrics-listen address)", err)
		}
		a.log.Info("serving metrics", "address", a.MetricsAddr().String())
	}
	if a.proxy != nil {
		// The proxy's own server (net/http), with these read and idle
		// timeouts.
		proxySrv = a.proxy.NewServer(10*time.Second, 120*time.Second)
		if err := serve(a.cfg.ProxyListen, proxySrv, &a.proxyAddr); err != nil {
			return fmt.Errorf("proxy listener: %w (pick a free -proxy-listen address)", err)
		}
		a.log.Info("proxying visitor traffic", "address", a.ProxyAddr().String())
		a.event(Event{Kind: EventListening, Addr: a.ProxyAddr()})
	}
	a.serving.Store(true)
	var wg sync.WaitGroup
	if a.edge != nil {
		wg.Go(func() { a.edge.Run(ctx) })
	}
	if a.passive != nil {
		wg.Go(func() { a.watchHeld(ctx) })
		if a.haFeed != nil {
			wg.Go(func() { a.feedHAProxy(ctx, a.haFeed, a.cfg.PassiveInterval) })
		}
		for _, path := range a.logFeeds {
			wg.Go(func() { a.feedAccessLog(ctx, path, a.cfg.PassiveInterval) })
		}
	}
	if a.cfg.ControlPlane != "" {
		a.acks.start(ctx, a.cp, a.cfg.ControlPlaneToken)
		wg.Go(func() { a.follow(ctx) })
	}
	for _, gw := range a.gateways {
		l, err := newLink(a, gw)
		if err != nil {
			return err
		}
		wg.Go(func() { l.run(ctx) })
	}
	<-ctx.Done()
	wg.Wait()
	a.acks.wait() // the last acknowledgements' sends, cut short by ctx
	return nil
}

type agentMetrics struct {
	attached     prometheus.Gauge
	jobs         *prometheus.CounterVec
	version      prometheus.Gauge
	followErrors prometheus.Counter
	refused      prometheus.Counter
	cpSwitches   prometheus.Counter
	held         prometheus.Gauge
	canaries     *prometheus.CounterVec
}

func newAgentMetrics() *agentMetrics {
	return &agentMetrics{
		attached:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_node_gateway_attached", Help: "The gateways the node is attached to now (1 while attached to its one gateway)."}),
		jobs:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vigil_node_probe_jobs_total", Help: "Probe jobs of the gateway, by result: up, down, not_run (the batch's time ran out first), invalid (the node could not build the probe)."}, []string{"result"}),
		version:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_node_publication_version", Help: "Version of the publication being served."}),
		followErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_node_publication_errors_total", Help: "Failed requests for the publication (the last one stays in use)."}),
		refused:      prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_node_publication_refused_total", Help: "Publications refused because they were older than the one served (a standby or shard that had not caught up)."}),
		cpSwitches:   prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_node_control_plane_switches_total", Help: "Times the node moved to another control plane of its list to follow the publication."}),
		held:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_node_passive_held", Help: "Origins no longer served whose passive window is held: it failed, and canaries have not proved a recovery yet."}),
		canaries:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vigil_node_canaries_total", Help: "Canary requests to the origins of held passive windows, by result: ok, failed, ignored (a status of -passive-ignore), invalid (not sent)."}, []string{"result"}),
	}
}

func (m *agentMetrics) register(r prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{m.attached, m.jobs, m.version, m.followErrors, m.refused, m.cpSwitches, m.held, m.canaries} {
		errs = append(errs, r.Register(c))
	}
	// Every labelled series exists at 0 from the start, so that the first
	// results after a scrape show in increase().
	for _, res := range []string{"up", "down", "not_run", "invalid"} {
		m.jobs.WithLabelValues(res)
	}
	for _, res := range []string{"ok", "failed", "ignored", "invalid"} {
		m.canaries.WithLabelValues(res)
	}
	return errors.Join(errs...)
}

// server is a listener's server: net/http's, or the proxy's.
type server interface {
	Serve(net.Listener) error
	Close() error
}
