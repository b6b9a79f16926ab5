package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/httpapi"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/preflight"
	"github.com/vigilcdn/vigil/core/store"
)

// Options configure an Agent beside its configuration.
type Options struct {
	// ConfigPath is where the configuration was read (for the logs).
	ConfigPath string
	// Logger receives everything the agent logs.
	Logger hclog.Logger
	// Diagnostics receives the HCL diagnostics of plugin configuration
	// errors, with source snippets (standard error in the command).
	Diagnostics io.Writer
	// JSONDiagnostics logs each diagnostic as one record of Logger
	// instead of writing text to Diagnostics (for a JSON log).
	JSONDiagnostics bool
	// FreshState lets the agent start with an empty state where a state
	// existed before (see store.OpenOptions).
	FreshState bool
	// ListenFile, when set, is written with the API's URL once it listens
	// (and again after a reload moves it), for scripts and tests.
	ListenFile string
	// Hooks are the engine's commit hooks (fault injection in tests).
	Hooks *engine.Hooks
	// Build is the build that runs, for vigil_build_info.
	Build Build
	// NewSource builds the vote sources (engine.PluginSource when nil:
	// tests give in-process ones).
	NewSource func(src *config.Source, pluginDir string, log hclog.Logger) engine.VoteSource
}

// Agent is a running control plane.
type Agent struct {
	opts Options
	log  hclog.Logger
	reg  *prometheus.Registry

	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup

	store   store.Store
	bolt    *store.Bolt // nil with etcd
	engine  *engine.Engine
	api     *httpapi.Handler
	parts   *parts
	cluster *cluster
	metrics *reloadMetrics
	history *engine.HistoryFeed // the verdict history (data_dir/history.ring; none with etcd)
	control *notify.Control     // the control plane's own alerts (alerts.go)
	limited prometheus.Gauge    // vigil_probe_concurrency_limited (warnScale)

	reloadMu sync.Mutex // one ReloadFile at a time, from reading to applying
	mu       sync.Mutex // guards the fields below and serializes reloads
	cfg      *config.Config
	tokens   httpapi.Tokens
	server   *http.Server
	listener net.Listener
	tls      apiTLS // https or http, on every listener the API has
}

// Start builds the control plane for cfg and starts it: rounds, API,
// publication, notifications. On error nothing is left running.
func Start(cfg *config.Config, opts Options) (a *Agent, err error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Diagnostics == nil {
		opts.Diagnostics = io.Discard
	}
	log := opts.Logger
	tokens, err := readTokens(cfg.Control.API)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo(opts.Build))
	ctx, cancel := context.WithCancel(context.Background())
	a = &Agent{opts: opts, log: log, reg: reg, ctx: ctx, cancel: cancel, cfg: cfg, tokens: tokens}
	built := a // the returns below set a to nil
	defer func() {
		if err != nil {
			_ = built.teardown()
		}
	}()
	a.metrics = newReloadMetrics(reg)
	a.limited = newLimitedGauge(reg)
	a.control = a.newControl(cfg)
	if err := a.openStore(cfg); err != nil {
		return nil, err
	}
	a.parts = &parts{a: a, cfg: cfg}
	engOpts := engine.Options{Logger: log, Registerer: reg, Store: a.store, Hooks: opts.Hooks, NewSource: opts.NewSource,
		AfterRound: returnMemory}
	a.cluster.engineOptions(&engOpts)
	a.watchCommits(&engOpts)
	eng, diags := engine.New(ctx, cfg, engOpts)
	if diags.HasErrors() {
		a.diagnose(cfg.Files, diags)
		for _, d := range diags.Errs() {
			if d, ok := d.(*hcl.Diagnostic); ok && d.Subject == nil {
				// Not a plugin's configuration error: the store, say.
				if why := a.cluster.explainTLS(); why != "" {
					return nil, fmt.Errorf("%s: %s; nothing started", d.Summary, why)
				}
				return nil, fmt.Errorf("%s: %s; nothing started", d.Summary, d.Detail)
			}
		}
		return nil, errors.New("a vote source could not start; nothing started")
	}
	a.engine = eng
	if a.bolt != nil {
		a.history = engine.OpenHistory(cfg.Control.DataDir, eng, engine.HistoryOptions{Rounds: cfg.Control.HistoryRounds, Logger: log.Named("history"), Registerer: reg})
	} else {
		a.history = engine.NoHistory("this agent keeps its state in etcd, so it keeps no verdict history (see docs/history.md)")
	}
	// What reads the engine's results observes its commits: the history
	// feed records each saved round, the notifiers wake on new events.
	eng.Observe(a.history)
	eng.Observe(a.parts)
	eng.Observe(a.commitsSaved())
	if a.cluster != nil {
		err = a.cluster.start(ctx, a, eng)
	} else {
		err = a.parts.start(ctx, eng)
	}
	if err != nil {
		return nil, err
	}
	a.api = httpapi.New(httpapi.Options{
		Engine: eng, Token: tokens.Operator, ReadToken: tokens.Read, NodeToken: tokens.Node, ReadsNeedToken: cfg.Control.API.ReadAccess == "token",
		Gatherer: reg, Logger: log.Named("api"), Extra: a.parts.extraRoutes, History: a.history,
		Reload: a.reloadAPI, DNSUpdates: a.parts,
	})
	if err := a.tls.set(cfg.Control.API.TLS); err != nil {
		return nil, err
	}
	ln, err := listen(cfg.Control.API.Listen)
	if err != nil {
		return nil, err
	}
	a.serve(ln)
	a.done.Add(1)
	go func() {
		defer a.done.Done()
		eng.Run(ctx)
	}()
	if tokens.Operator == "" {
		log.Warn("no API token configured: operator actions are refused; set control { api { token_env = \"VIGIL_TOKEN\" } }")
	}
	a.metrics.reloaded(true)
	cfg.ForgetText() // nothing prints this configuration's diagnostics any more
	log.Info("vigil agent started", "api", a.tls.scheme()+"://"+ln.Addr().String(), "sources", len(cfg.Sources), "sites", len(cfg.Sites),
		"round_interval", cfg.Control.RoundInterval, "data_dir", cfg.Control.DataDir)
	warnScale(log, cfg, a.limited)
	return a, nil
}

// openFileLimit reads the open-file limit the plugins inherit (a test
// sets another).
var openFileLimit = preflight.OpenFileLimit

// warnScale logs, at start and on reload, that the eligible sites exceed
// sites_per_round: how long a full cycle takes and the detection time
// that follows (preflight.ScaleOf, as vigil validate says it); and that
// the open-file limit caps the direct probes in flight below a round's
// targets (preflight.FileLimitOf), which limited reports as 1 (nil: no
// metric).
func warnScale(log hclog.Logger, cfg *config.Config, limited prometheus.Gauge) {
	if s, over := preflight.ScaleOf(cfg); over && s.Auto {
		log.Warn("more sites than an auto-sized round starts with: each site is probed once a cycle until the rounds grow",
			"sites", s.Sites, "sites_per_round", "auto", "first_rounds", s.PerRound, "cycle_at_most", s.Cycle, "detection_at_most", s.Detection, "detail", s.Warning())
	} else if over {
		log.Warn("more sites than sites_per_round: each site is probed once a cycle, not every round",
			"sites", s.Sites, "sites_per_round", s.PerRound, "cycle", s.Cycle, "detection", s.Detection, "detail", s.Warning())
	}
	fl, capped := preflight.FileLimitOf(cfg, openFileLimit())
	if capped {
		log.Warn("the open-file limit caps the probes in flight below what a round needs",
			"open_file_limit", fl.Limit, "probes_in_flight", fl.Usable, "targets_per_round", fl.Need, "detail", fl.Warning())
	}
	if limited != nil {
		limited.Set(map[bool]float64{false: 0, true: 1}[capped])
	}
}

// newLimitedGauge is vigil_probe_concurrency_limited.
func newLimitedGauge(reg prometheus.Registerer) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_probe_concurrency_limited",
		Help: "1 when the open-file limit (process_max_fds) caps the direct source's probes in flight below the targets of a round (the agent's log says by how much), 0 otherwise."})
	reg.MustRegister(g)
	return g
}

// Engine is the agent's engine.
func (a *Agent) Engine() *engine.Engine { return a.engine }

// Addr is the API's address.
func (a *Agent) Addr() net.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.listener.Addr()
}

func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("API listen on %s: %w (is another agent running? change control { api { listen } })", addr, err)
	}
	return ln, nil
}

// serve serves the API on ln (and closes the previous listener, if any,
// letting its requests finish). Called with a.mu held or before Start
// returns.
func (a *Agent) serve(ln net.Listener) {
	var handler http.Handler = a.api
	handler = a.cluster.wrap(handler)
	// Shutting the server down ends its long polls at once (they answer as
	// at the end of their wait), rather than waiting up to a poll's length.
	drain := make(chan struct{})
	// A refused TLS handshake (a client that does not trust the
	// certificate, or has none where one is asked for) is logged by
	// net/http: through the agent's log, not standard error.
	errLog := a.log.Named("api").StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: errLog,
		BaseContext: func(net.Listener) context.Context { return httpapi.WithDrain(context.Background(), drain) }}
	var drainOnce sync.Once
	srv.RegisterOnShutdown(func() { drainOnce.Do(func() { close(drain) }) })
	oldSrv := a.server
	a.server, a.listener = srv, ln
	a.done.Add(1)
	go func() {
		defer a.done.Done()
		if err := srv.Serve(a.tls.listener(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("API server stopped", "error", err)
		}
	}()
	if oldSrv != nil {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = oldSrv.Shutdown(ctx)
		}()
	}
	a.writeListenFile(ln)
}

func (a *Agent) writeListenFile(ln net.Listener) {
	if a.opts.ListenFile == "" {
		return
	}
	tmp := a.opts.ListenFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(a.tls.scheme()+"://"+ln.Addr().String()+"\n"), 0o644); err == nil {
		err = os.Rename(tmp, a.opts.ListenFile)
		if err != nil {
			a.log.Warn("cannot write the listen file", "file", a.opts.ListenFile, "error", err)
		}
	} else {
		a.log.Warn("cannot write the listen file", "file", a.opts.ListenFile, "error", err)
	}
}

// openStore opens the configured store: bbolt in data_dir, or etcd with
// the cluster around it.
func (a *Agent) openStore(cfg *config.Config) error {
	if cfg.Control.Store == nil {
		st, err := store.OpenWith(cfg.Control.DataDir, store.OpenOptions{
			JournalSize: store.DefaultJournalSize, Fresh: a.opts.FreshState, OnBackup: a.logBackup,
			Reserve: true, OnReserve: a.onReserve,
		})
		if err != nil {
			return err
		}
		rep := st.Report()
		if rep.Fresh {
			moved := make([]string, len(rep.Moved))
			for i, m := range rep.Moved {
				moved[i] = m.From + " -> " + m.To
			}
			a.log.Warn("starting with an empty state, as -fresh-state asks: the old state was unusable and is kept aside",
				"problem", rep.Problem, "moved", strings.Join(moved, ", "))
		}
		for _, w := range rep.Warnings {
			a.log.Warn("state file", "path", rep.Path, "warning", w)
		}
		a.log.Debug("state file checked", "path", rep.Path, "sites", rep.Sites, "events", rep.Events, "size", rep.Size, "took", rep.Took)
		a.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vigil_store_reserve_in_use",
			Help: "1 while data_dir is full and the state file writes into its space reserve (docs/state.md)"}, func() float64 {
			if st.ReserveInUse() {
				return 1
			}
			return 0
		}))
		a.store, a.bolt = st, st
		return nil
	}
	c, err := newCluster(cfg, a.log, a.reg)
	if err != nil {
		return err
	}
	a.store, a.cluster = c.store, c
	return nil
}

// bigRound is the size of round from which the agent gives the round's
// garbage back to the system when it ends.
const bigRound = 10000

// returnMemory gives a large round's garbage back to the system at once.
// A round of many sites makes tens of megabytes of short-lived ballots and
// votes; left to the background scavenger, rounds that follow each other
// closely keep it resident. One collection per round at that size costs a
// few per cent of a core.
func returnMemory(res engine.RoundResult) {
	if res.Probed >= bigRound {
		debug.FreeOSMemory()
	}
}

// logBackup reports the rotating last-good copy of the state file.
func (a *Agent) logBackup(rep *store.BackupReport, err error) {
	if err != nil {
		a.log.Error("cannot write the last-good copy of the state; the previous copy stays", "error", err)
		return
	}
	a.log.Debug("last-good copy of the state written", "path", rep.Path, "size", rep.Size, "took", rep.Took)
}

// logReserve says what the state file's space reserve did (store.Reserve).
func (a *Agent) logReserve(e store.ReserveEvent) {
	switch {
	case e.Released:
		a.log.Error("data_dir is full: the state file now writes into its space reserve, so rounds and actions are still saved and published; free space in data_dir before the reserve is used up",
			"reserve_bytes", e.Size)
	case e.Restored:
		a.log.Info("data_dir has room again: the state file's space reserve is written again", "reserve_bytes", e.Size)
	case e.Err != nil:
		a.log.Warn("cannot write the state file's space reserve: when data_dir fills, saving stops at once; free space in data_dir", "error", e.Err)
	}
}

// readToken reads the API token from the environment or a file; secrets
// never reach the logs.
func readToken(c config.API) (string, error) {
	return readOneToken("token", c.TokenEnv, c.TokenFile)
}

// readTokens reads the operator's token and the scoped ones. Two scopes
// sharing one value are refused: the token would have the larger scope
// everywhere it is used.
func readTokens(c config.API) (httpapi.Tokens, error) {
	var t httpapi.Tokens
	var err error
	if t.Operator, err = readToken(c); err != nil {
		return t, err
	}
	if t.Read, err = readOneToken("read_token", c.ReadTokenEnv, c.ReadTokenFile); err != nil {
		return t, err
	}
	if t.Node, err = readOneToken("node_token", c.NodeTokenEnv, c.NodeTokenFile); err != nil {
		return t, err
	}
	for _, pair := range []struct {
		a, b       string
		aSet, bSet string
	}{{t.Operator, t.Read, "token", "read_token"}, {t.Operator, t.Node, "token", "node_token"}, {t.Read, t.Node, "read_token", "node_token"}} {
		if pair.a != "" && pair.a == pair.b {
			return t, fmt.Errorf("control { api } gives %s_env|file and %s_env|file the same token: give each scope a token of its own", pair.aSet, pair.bSet)
		}
	}
	return t, nil
}

// readOneToken reads a token from NAME_env, else NAME_file ("" when
// neither is set).
func readOneToken(name, env, file string) (string, error) {
	switch {
	case env != "":
		t := strings.TrimSpace(os.Getenv(env))
		if t == "" {
			return "", fmt.Errorf("control { api { %s_env = %q } } names an empty or unset environment variable; export it or remove %s_env", name, env, name)
		}
		return t, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading the API %s_file: %w", name, err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", fmt.Errorf("the API %s_file %s is empty", name, filepath.Clean(file))
		}
		return t, nil
	}
	return "", nil
}

// Stop ends everything: the API (letting its requests finish for up to
// ten seconds), the rounds, the notifiers, the cluster roles, the sources
// and the store.
func (a *Agent) Stop() error {
	a.cancel()
	a.mu.Lock()
	srv := a.server
	a.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	return a.teardown()
}

// teardown releases what was started; Stop and a failed Start use it.
func (a *Agent) teardown() error {
	a.cancel()
	a.done.Wait()
	if a.parts != nil {
		a.parts.stop()
	}
	a.cluster.close()
	if err := a.history.Close(); err != nil {
		a.log.Warn("closing the history file", "error", err)
	}
	if a.engine != nil {
		a.engine.Close()
	}
	if a.store != nil {
		if err := a.store.Close(); err != nil {
			a.log.Error("closing the store", "error", err)
			return err
		}
	}
	return nil
}
