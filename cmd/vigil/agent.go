package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/agent"
	"github.com/vigilcdn/vigil/core/config"
)

// defaultConfigPath is the configuration the agent reads without -config
// (where the package installs it).
var defaultConfigPath = "/etc/vigil/vigil.hcl"

// agentGCPercent is the agent's GOGC when the environment sets none.
const agentGCPercent = 50

func init() {
	register(command{
		name: "agent", synopsis: "run the control plane: rounds, API, publication, notifications",
		usage: "vigil agent [-config PATH] [flags]",
		help: `PATH is a file, or a folder whose *.hcl files form one configuration;
without -config it is ` + defaultConfigPath + `. Relative paths inside it
(data_dir, plugin_dir, token_file, ...) are taken from the folder of the
file that names them. SIGHUP (or vigil reload) reloads the configuration
(an invalid one is refused and the old one stays); SIGINT and SIGTERM stop
the agent cleanly.

-dev starts a sandbox from the binaries alone: a temporary state, three
demo origins served by the agent on loopback and a site "demo" over them,
the status page and an operator token it prints; nothing is kept.`,
		run: runAgent,
	})
}

func runAgent(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("agent")
	path := fs.String("config", "", "configuration file or folder of *.hcl files (default "+defaultConfigPath+")")
	dev := fs.Bool("dev", false, "run a sandbox: temporary state, built-in demo origins and site, the status page (no -config)")
	devListen := fs.String("dev-listen", "127.0.0.1:8470", "the API's address with -dev")
	level := newChoice("info", "trace", "debug", "info", "warn", "error")
	fs.Var(level, "log-level", "log `LEVEL`: trace, debug, info, warn or error")
	jsonLog := fs.Bool("log-json", false, "log as JSON lines")
	fresh := fs.Bool("fresh-state", false, "start with an empty state even though data_dir held one (the old file is moved aside, never deleted)")
	listenFile := fs.String("listen-file", "", "write the API's URL to this file once it listens (for scripts and tests)")
	debugListen := fs.String("debug-listen", "", "serve Go's profiler (/debug/pprof/) on this address, such as 127.0.0.1:6060; keep it on loopback")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "vigil agent: unexpected argument %q: give the configuration with -config %s\n", pos[0], pos[0])
		return 2
	}
	switch {
	case *dev && *path != "":
		fmt.Fprintln(stderr, "vigil agent: -dev makes its own configuration: give -dev or -config, not both")
		return 2
	case *dev:
		config, stop, err := devSandbox(*devListen, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "vigil agent -dev: %v\n", err)
			return 1
		}
		defer stop()
		*path = config
	case *path == "":
		if _, err := os.Stat(defaultConfigPath); err != nil {
			why := "does not exist"
			if !errors.Is(err, os.ErrNotExist) {
				why = fmt.Sprintf("cannot be read (%v)", err)
			}
			fmt.Fprintf(stderr, "vigil agent: no -config, and %s %s: give -config PATH, such as examples/quickstart.hcl, or try a sandbox: vigil agent -dev\n", defaultConfigPath, why)
			return 2
		}
		*path = defaultConfigPath
	}
	if os.Getenv("GOGC") == "" {
		// The agent's heap is large and steady (the fleet's state), and a
		// round's garbage is small beside it: collecting at half of the
		// heap again, rather than all of it, keeps the resident memory near
		// the live state for a little more GC work (GOGC overrides it).
		debug.SetGCPercent(agentGCPercent)
	}
	log := hclog.New(&hclog.LoggerOptions{
		Name: "vigil", Level: hclog.LevelFromString(level.String()), Output: stderr, JSONFormat: *jsonLog,
		Color: hclog.AutoColor, TimeFormat: "2006-01-02T15:04:05.000Z0700",
	})
	if *jsonLog {
		log = durationsAsText(log)
	}
	cfg, diags := config.LoadCached(*path)
	if len(diags) > 0 && *jsonLog {
		agent.LogDiagnostics(log, diags)
	} else if len(diags) > 0 {
		_ = config.WriteDiagnostics(stderr, cfg.Files, diags)
	}
	if diags.HasErrors() {
		if *jsonLog {
			log.Error("configuration not valid; nothing started", "config", *path)
		} else {
			fmt.Fprintf(stderr, "vigil agent: %s is not valid; nothing started\n", *path)
		}
		return 1
	}
	// Signals are taken before anything starts: a SIGHUP that comes right
	// after "started" must reload, not kill.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	a, err := agent.Start(cfg, agent.Options{
		ConfigPath: *path, Logger: log, Diagnostics: stderr, JSONDiagnostics: *jsonLog, FreshState: *fresh, ListenFile: *listenFile, Hooks: faultHooks(log),
		Build: agent.Build{Version: version, Commit: buildCommit()},
	})
	if err != nil {
		if *jsonLog {
			log.Error("not started", "error", err)
		} else {
			fmt.Fprintf(stderr, "vigil agent: %v\n", err)
		}
		return 1
	}
	// Loading a large configuration leaves much garbage behind: give it
	// back to the system now rather than over the next minutes.
	debug.FreeOSMemory()
	if *debugListen != "" {
		if err := serveDebug(*debugListen, log); err != nil {
			fmt.Fprintf(stderr, "vigil agent: -debug-listen: %v\n", err)
		}
	}
	return wait(a, sigs, log)
}

// wait serves signals until SIGINT or SIGTERM: SIGHUP reloads the
// configuration, keeping the old one when the new one is invalid.
func wait(a *agent.Agent, sigs <-chan os.Signal, log hclog.Logger) int {
	for sig := range sigs {
		if sig == syscall.SIGHUP {
			reload(a)
			continue
		}
		log.Info("stopping", "signal", sig.String())
		break
	}
	if err := a.Stop(); err != nil {
		return 1
	}
	log.Info("stopped")
	return 0
}

// reload reads the configuration again and applies it (SIGHUP): the
// agent logs what it applied or why it refused, and sets the reload gauge.
func reload(a *agent.Agent) {
	_, _ = a.ReloadFile("SIGHUP")
}

// serveDebug serves net/http/pprof on addr, for profiling a running agent.
func serveDebug(addr string, log hclog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Warn("serving the Go profiler", "address", "http://"+ln.Addr().String()+"/debug/pprof/")
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}
