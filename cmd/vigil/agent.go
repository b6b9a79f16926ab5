package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/vigilcdn/vigil/core/api"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/store"
)

func init() {
	register("agent", "run the control plane: rounds, API, publication, notifications", runAgent)
}

func runAgent(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file or folder of *.hcl files (required)")
	level := fs.String("log-level", "info", "log level: trace, debug, info, warn, error")
	jsonLog := fs.Bool("log-json", false, "log as JSON lines")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "vigil agent: -config is required, such as: vigil agent -config examples/quickstart.hcl")
		return 2
	}
	log := hclog.New(&hclog.LoggerOptions{
		Name: "vigil", Level: hclog.LevelFromString(*level), Output: stderr, JSONFormat: *jsonLog,
		Color: hclog.AutoColor, TimeFormat: "2006-01-02T15:04:05.000Z0700",
	})
	cfg, diags := config.Load(*path)
	if len(diags) > 0 {
		_ = config.WriteDiagnostics(stderr, cfg.Files, diags)
	}
	if diags.HasErrors() {
		fmt.Fprintf(stderr, "vigil agent: %s is not valid; nothing started\n", *path)
		return 1
	}
	a, err := startAgent(cfg, *path, log, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vigil agent: %v\n", err)
		return 1
	}
	return a.wait()
}

type agent struct {
	log    hclog.Logger
	path   string
	stderr io.Writer
	store  store.Store
	engine *engine.Engine
	server *http.Server
	cancel context.CancelFunc
	done   sync.WaitGroup
	ctx    context.Context
	hooks  *agentHooks
	extras []func() // closers of optional parts

	// cluster is set when the state lives in etcd (cmd/vigil/ha.go).
	cluster *cluster
}

// readToken reads the API token from the environment or a file; secrets
// never reach the logs.
func readToken(c config.API) (string, error) {
	switch {
	case c.TokenEnv != "":
		t := strings.TrimSpace(os.Getenv(c.TokenEnv))
		if t == "" {
			return "", fmt.Errorf("control { api { token_env = %q } } names an empty or unset environment variable; export it or remove token_env", c.TokenEnv)
		}
		return t, nil
	case c.TokenFile != "":
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return "", fmt.Errorf("reading the API token_file: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", fmt.Errorf("the API token_file %s is empty", c.TokenFile)
		}
		return t, nil
	}
	return "", nil
}

func startAgent(cfg *config.Config, path string, log hclog.Logger, stderr io.Writer) (*agent, error) {
	token, err := readToken(cfg.Control.API)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	st, cl, err := openStore(cfg, log, reg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &agent{log: log, path: path, stderr: stderr, store: st, cancel: cancel, ctx: ctx, cluster: cl}
	hooks := newAgentHooks(a, cfg, reg)
	a.hooks = hooks
	engOpts := engine.Options{Logger: log, Registerer: reg, Store: st, OnCommit: hooks.onCommit}
	cl.engineOptions(&engOpts)
	eng, diags := engine.New(ctx, cfg, engOpts)
	if diags.HasErrors() {
		_ = config.WriteDiagnostics(stderr, cfg.Files, diags)
		cancel()
		st.Close()
		return nil, errors.New("a vote source could not start; nothing started")
	}
	a.engine = eng
	start := hooks.start
	if cl != nil {
		start = func(ctx context.Context, eng *engine.Engine) error { return cl.start(ctx, a, eng, hooks) }
	}
	if err := start(ctx, eng); err != nil {
		eng.Close()
		cancel()
		st.Close()
		return nil, err
	}
	handler := api.New(api.Options{
		Engine: eng, Token: token, ReadsNeedToken: cfg.Control.API.ReadAccess == "token",
		Gatherer: reg, Logger: log.Named("api"), Extra: hooks.extraRoutes,
	})
	handler = cl.wrap(handler)
	ln, err := net.Listen("tcp", cfg.Control.API.Listen)
	if err != nil {
		eng.Close()
		cancel()
		st.Close()
		return nil, fmt.Errorf("API listen on %s: %w (is another agent running? change control { api { listen } })", cfg.Control.API.Listen, err)
	}
	a.server = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	a.done.Add(2)
	go func() {
		defer a.done.Done()
		if err := a.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("API server stopped", "error", err)
		}
	}()
	go func() {
		defer a.done.Done()
		eng.Run(ctx)
	}()
	if token == "" {
		log.Warn("no API token configured: operator actions are refused; set control { api { token_env = \"VIGIL_TOKEN\" } }")
	}
	log.Info("vigil agent started", "api", "http://"+ln.Addr().String(), "sources", len(cfg.Sources), "sites", len(cfg.Sites),
		"round_interval", cfg.Control.RoundInterval, "data_dir", cfg.Control.DataDir)
	return a, nil
}

// wait serves signals until SIGINT or SIGTERM: SIGHUP reloads the
// configuration, keeping the old one when the new one is invalid.
func (a *agent) wait() int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	for sig := range sigs {
		if sig == syscall.SIGHUP {
			a.reload()
			continue
		}
		a.log.Info("stopping", "signal", sig.String())
		break
	}
	return a.stop()
}

func (a *agent) reload() {
	a.log.Info("reloading configuration", "config", a.path)
	cfg, diags := config.Load(a.path)
	if diags.HasErrors() {
		var b strings.Builder
		_ = config.WriteDiagnostics(&b, cfg.Files, diags)
		a.log.Error("configuration not reloaded: it is invalid; the old one stays in force", "errors", len(diags.Errs()))
		fmt.Fprint(a.stderr, b.String())
		return
	}
	if d := a.engine.Reload(a.ctx, cfg); d.HasErrors() {
		var b strings.Builder
		_ = config.WriteDiagnostics(&b, cfg.Files, d)
		a.log.Error("configuration not reloaded: a vote source could not start; the old one stays in force")
		fmt.Fprint(a.stderr, b.String())
		return
	}
	a.hooks.reload(a.ctx, a.engine, cfg)
	a.cluster.reload(cfg)
}

func (a *agent) stop() int {
	a.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = a.server.Shutdown(ctx)
	a.done.Wait()
	for _, c := range a.extras {
		c()
	}
	a.cluster.close()
	a.engine.Close()
	if err := a.store.Close(); err != nil {
		a.log.Error("closing the store", "error", err)
		return 1
	}
	a.log.Info("stopped")
	return 0
}
