package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/vigilcdn/vigil/sdk/internal/glue"
)

// Logger is the plugin's log. Each method writes one line with a message
// and key/value pairs: log.Info("probing", "targets", 12). vigil re-emits
// the lines in its own log under the source's name.
//
// The Logger [Serve] hands to the factory is a github.com/hashicorp/go-hclog
// Logger writing JSON lines on stderr, the logger go-plugin itself uses on
// the plugin side. Code already written against hclog may assert it,
// log.(hclog.Logger), which the SDK keeps true for as long as it serves
// through go-plugin; code that only logs needs nothing but this interface.
type Logger interface {
	Trace(msg string, args ...any)
	Debug(msg string, args ...any)
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
	Error(msg string, args ...any)
}

// Factory builds the plugin's VoteSource. log is the plugin's log (see
// [Logger]); keep it for the plugin's own logging.
type Factory func(log Logger) VoteSource

// ServeOption changes how [Serve] runs the plugin. Options are added in
// later SDK versions without breaking existing plugins.
type ServeOption interface {
	apply(*serveConfig)
}

type serveConfig struct {
	level  hclog.Level
	args   []string
	stdout io.Writer
	stderr io.Writer
	exit   func(int)
	getenv func(string) string
	debug  bool
	// stop ends a debug serve; nil means SIGINT or SIGTERM.
	stop context.Context
}

type optionFunc func(*serveConfig)

func (f optionFunc) apply(c *serveConfig) { f(c) }

// WithLogLevel sets the lowest level the plugin logs: "trace", "debug"
// (the default), "info", "warn" or "error". An unknown name keeps "debug".
func WithLogLevel(level string) ServeOption {
	return optionFunc(func(c *serveConfig) {
		if l := hclog.LevelFromString(level); l != hclog.NoLevel {
			c.level = l
		}
	})
}

// DebugEnv is the environment variable that starts a plugin in debug
// mode when set to 1 or true: see [WithDebug].
const DebugEnv = glue.DebugEnv

// ReattachEnv is the environment variable from which vigil (the agent,
// `vigil probe -config` and `vigil validate`) reads the reattach string a
// plugin prints in debug mode: see [WithDebug].
const ReattachEnv = glue.ReattachEnv

// WithDebug serves the plugin in debug mode, as the environment variable
// VIGIL_PLUGIN_DEBUG=1 or the flag -debug do for a binary run by hand
// (under a debugger, dlv exec ./vigil-source-x -- -debug). The plugin
// then does not wait for vigil to start it: it listens on a socket of its
// own and prints on stdout a reattach string, one line,
//
//	VIGIL_REATTACH_PLUGINS='{"vigil-source-x":{"protocol":"grpc","protocol_version":2,"pid":4242,"addr":{"network":"unix","string":"/tmp/plugin123"}}}'
//
// Exported in vigil's environment, it makes the agent, `vigil probe
// -config` and `vigil validate` connect to this process instead of
// starting the binary, for each source whose name or `plugin` binary name
// is the key (Info's Name; edit the key to pick one source). vigil never
// restarts nor stops a process it attached to, and logs so; the transport
// is not encrypted (no AutoMTLS) and the process serves until SIGINT or
// SIGTERM. Log lines go to stderr as plain text, and stdout and stderr
// stay the terminal's. Debug mode is for a developer's machine only.
func WithDebug() ServeOption {
	return optionFunc(func(c *serveConfig) { c.debug = true })
}

// Serve runs the plugin: it is the whole of a plugin's main.
//
//	func main() {
//		sdk.Serve(func(log sdk.Logger) sdk.VoteSource { return &mySource{log: log} })
//	}
//
// Started by vigil, it answers vigil's handshake, serves the VoteSource
// built by factory over gRPC and returns only when vigil stops the plugin.
// The process also exits by itself when the vigil process that started it
// goes away, even if vigil was killed with SIGKILL.
//
// Run by hand (without the handshake's environment), the binary answers
// `-version` (the plugin's name, version and protocol version) and
// `-schema` (its Info and ConfigSchema as JSON, what `vigil plugin docs`
// renders), and otherwise says what it is and exits with status 1.
func Serve(factory Factory, opts ...ServeOption) {
	serveWith(factory, newServeConfig(opts))
}

// serveWith is Serve with its configuration.
func serveWith(factory Factory, cfg serveConfig) {
	if err := run(factory, cfg); err != nil {
		fmt.Fprintln(cfg.stderr, err)
		cfg.exit(1)
	}
}

// Run is [Serve] returning an error instead of ending the process, as
// terraform-plugin-go's tf6server.Serve does: main decides what to do
// with it.
//
//	func main() {
//		if err := sdk.Run(factory); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//	}
//
// It returns nil once vigil stopped the plugin, once -version or -schema
// was answered, and when debug mode ends on SIGINT or SIGTERM. It returns
// an error when the binary was run by hand without a flag it answers
// (the error says what the binary is, as Serve prints), when the
// plugin's Info or ConfigSchema fails there, or when debug mode cannot
// start. One exit stays: a served plugin whose vigil went away exits with
// status 1 at once, as with Serve.
func Run(factory Factory, opts ...ServeOption) error {
	return run(factory, newServeConfig(opts))
}

func newServeConfig(opts []ServeOption) serveConfig {
	cfg := serveConfig{level: hclog.Debug, args: os.Args[1:], stdout: os.Stdout, stderr: os.Stderr, exit: os.Exit, getenv: os.Getenv}
	for _, o := range opts {
		o.apply(&cfg)
	}
	return cfg
}

func run(factory Factory, cfg serveConfig) error {
	if cfg.getenv(glue.MagicCookieKey) != glue.MagicCookieValue && (cfg.debug || debugWanted(cfg.getenv(DebugEnv), cfg.args)) {
		return serveDebug(factory, cfg)
	}
	if cfg.getenv(glue.MagicCookieKey) != glue.MagicCookieValue {
		log := hclog.New(&hclog.LoggerOptions{Level: cfg.level, Output: cfg.stderr})
		return byHand(factory(log), cfg.args, cfg.stdout)
	}
	log := hclog.New(&hclog.LoggerOptions{
		Level:      cfg.level,
		Output:     cfg.stderr,
		JSONFormat: true,
	})
	if offered := cfg.getenv("PLUGIN_PROTOCOL_VERSIONS"); offered != "" && !offers(offered, ProtocolVersion) {
		log.Error(fmt.Sprintf("this plugin serves vote-source protocol %d (SDK %s) and the host offers only %s: upgrade vigil to a release that speaks protocol %d (sdk/PROTOCOL.md, \"Compatibility\")",
			ProtocolVersion, Version, offered, ProtocolVersion))
	}
	impl := factory(log)
	watchParent(log, os.Getppid(), 200*time.Millisecond, func() { os.Exit(1) })
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: glue.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			ProtocolVersion: {glue.PluginName: &grpcPlugin{impl: impl}},
		},
		GRPCServer: newGRPCServer,
		Logger:     log,
	})
	return nil
}

// debugWanted reports whether the environment's value of DebugEnv or
// the arguments ask for debug mode.
func debugWanted(env string, args []string) bool {
	if on, err := strconv.ParseBool(env); err == nil && on {
		return true
	}
	for _, a := range args {
		if a == "-debug" || a == "--debug" {
			return true
		}
	}
	return false
}

// serveDebug serves the plugin in debug mode (see WithDebug) until
// cfg.stop ends, or SIGINT or SIGTERM.
func serveDebug(factory Factory, cfg serveConfig) error {
	log := hclog.New(&hclog.LoggerOptions{Level: cfg.level, Output: cfg.stderr})
	impl := factory(log)
	ictx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	info, err := impl.Info(ictx)
	cancel()
	if err != nil {
		return fmt.Errorf("debug mode: plugin info: %w", err)
	}
	ctx := cfg.stop
	if ctx == nil {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	go plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: glue.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			ProtocolVersion: {glue.PluginName: &grpcPlugin{impl: impl}},
		},
		GRPCServer: newGRPCServer,
		Logger:     log,
		Test:       &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: reattach, CloseCh: closed},
	})
	select {
	case rc := <-reattach:
		line, err := glue.FormatReattach(info.Name, rc)
		if err != nil {
			return fmt.Errorf("debug mode: %w", err)
		}
		fmt.Fprintf(cfg.stderr, "%s %s serves in debug mode (pid %d); set this in the environment of the vigil agent, vigil probe -config or vigil validate to use this process instead of starting the binary (Ctrl-C stops it):\n",
			info.Name, info.Version, rc.Pid)
		fmt.Fprintf(cfg.stdout, "%s='%s'\n", ReattachEnv, line)
	case <-closed:
		return errors.New("debug mode: the plugin stopped before it listened (see the log above)")
	}
	<-closed
	return nil
}

// offers reports whether the comma-separated list of versions holds v.
func offers(list string, v int) bool {
	for _, f := range strings.Split(list, ",") {
		if strings.TrimSpace(f) == strconv.Itoa(v) {
			return true
		}
	}
	return false
}

// schemaDump is what -schema prints.
type schemaDump struct {
	Name            string   `json:"name"`
	Version         string   `json:"version"`
	ProtocolVersion int      `json:"protocol_version"`
	SDKVersion      string   `json:"sdk_version"`
	Capabilities    []string `json:"capabilities"`
	Schema
}

// byHand answers a plugin binary run by hand: -version and -schema on
// stdout; anything else is an error saying what the binary is.
func byHand(impl VoteSource, args []string, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := impl.Info(ctx)
	if err != nil {
		return fmt.Errorf("plugin info: %w", err)
	}
	info.ProtocolVersion, info.SDKVersion = ProtocolVersion, Version
	if info.Capabilities == nil {
		info.Capabilities = []string{}
	}
	for _, a := range args {
		switch a {
		case "-version", "--version":
			fmt.Fprintf(stdout, "%s %s (vigil vote-source protocol %d, SDK %s)\n", info.Name, info.Version, info.ProtocolVersion, info.SDKVersion)
			return nil
		case "-schema", "--schema":
			schema, err := impl.ConfigSchema(ctx)
			if err != nil {
				return fmt.Errorf("config schema: %w", err)
			}
			if err := schema.Validate(); err != nil {
				return err
			}
			if schema.Attributes == nil {
				schema.Attributes = []Attribute{}
			}
			b, err := json.MarshalIndent(schemaDump{Name: info.Name, Version: info.Version, ProtocolVersion: info.ProtocolVersion,
				SDKVersion: info.SDKVersion, Capabilities: info.Capabilities, Schema: schema}, "", "  ")
			if err != nil {
				return fmt.Errorf("config schema: %w", err)
			}
			fmt.Fprintf(stdout, "%s\n", b)
			return nil
		}
	}
	return fmt.Errorf("%s %s is a vigil vote-source plugin (protocol %d): vigil starts it, named by a source block's `plugin` attribute.\n"+
		"Run by hand it answers -version, -schema (its config block's attributes, as JSON; `vigil plugin docs %s` renders them)\n"+
		"and -debug (it serves in debug mode and prints a VIGIL_REATTACH_PLUGINS line for vigil; see the SDK's README, \"Debugging a plugin\")",
		info.Name, info.Version, info.ProtocolVersion, info.Name)
}

func newGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	opts = append(opts, grpc.MaxRecvMsgSize(glue.MaxMessageSize), grpc.MaxSendMsgSize(glue.MaxMessageSize))
	return grpc.NewServer(opts...)
}

// watchParent calls exit once the process's parent is no longer ppid (it
// died and the process was re-parented). On Linux the host also sets
// PR_SET_PDEATHSIG; this covers other systems and hosts that do not.
func watchParent(log Logger, ppid int, every time.Duration, exit func()) {
	if ppid <= 1 {
		return // started by init or a container's pid 1: nothing to watch
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for range t.C {
			if os.Getppid() != ppid {
				log.Error("vigil host went away; exiting", "host_pid", ppid)
				exit()
				return
			}
		}
	}()
}
