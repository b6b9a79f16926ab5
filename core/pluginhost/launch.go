package pluginhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/host"
)

// resolve finds the plugin binary: a value with a path separator is a path;
// a bare name is looked up in dir, then in PATH.
func resolve(name, dir string) (string, error) {
	if name == "" {
		return "", errors.New("no plugin binary named: set `plugin` to a binary name or path")
	}
	if strings.ContainsRune(name, filepath.Separator) || strings.ContainsRune(name, '/') {
		if err := isExecutable(name); err != nil {
			return "", fmt.Errorf("plugin %q: %w", name, err)
		}
		return name, nil
	}
	var where []string
	if dir != "" {
		p := filepath.Join(dir, name)
		if err := isExecutable(p); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("plugin %q: %w", p, err)
		}
		where = append(where, fmt.Sprintf("plugin_dir %q", dir))
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	where = append(where, "PATH")
	return "", fmt.Errorf("plugin %q not found in %s: build it (make build puts the shipped plugins in bin/), set plugin_dir, or give its path", name, strings.Join(where, " nor in "))
}

func isExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory, not a plugin binary")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return errors.New("is not executable: chmod +x it")
	}
	return nil
}

// parseChecksum parses "sha256:<64 hex digits>".
// parseChecksum is config.ParseChecksum: one reader of checksums.
func parseChecksum(s string) ([]byte, error) { return config.ParseChecksum(s) }

// verifyChecksum compares the file's SHA-256 with want and says both sums
// on a mismatch.
func verifyChecksum(path string, want []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("checksum of plugin %q: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("checksum of plugin %q: %w", path, err)
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		return fmt.Errorf("plugin %q has checksum sha256:%x but the configuration expects sha256:%x: refusing to start it; if the binary was updated on purpose, put its new sum in `checksum`%w", path, got, want, errChecksumMark)
	}
	return nil
}

// errChecksumMark wraps errChecksum without adding to the message.
var errChecksumMark = silent{errChecksum}

type silent struct{ error }

func (silent) Error() string { return "" }

func (s silent) Unwrap() error { return s.error }

// hostEnv returns NAME=value for each named variable set in the host's
// environment, and the names that are not set.
func hostEnv(names []string) (env, missing []string) {
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
		} else {
			missing = append(missing, n)
		}
	}
	return env, missing
}

// process is one running plugin process.
type process struct {
	client *plugin.Client
	cmd    *exec.Cmd // nil for an attached process
	pid    int
	// attached is a process started by hand in debug mode, which vigil
	// attached to (VIGIL_REATTACH_PLUGINS): never killed; rpc is its
	// connection, closed when the source lets it go.
	attached bool
	rpc      plugin.ClientProtocol
	src      sdk.VoteSource
	log      *exitLogger
	// info is what the process said of itself (Info) once started: the
	// protocol agreed and its capabilities decide what it is handed.
	info sdk.Info
	// watching lives as long as the process: its suspect stream (see
	// Source.watch) ends with it. unwatch ends it.
	watching context.Context
	unwatch  context.CancelFunc
}

// exitLogger is the logger go-plugin gets for one process. go-plugin logs
// the process's exit as an ERROR whenever its status is not 0, which it is
// not when vigil itself ends the process (a refused configuration, a hung
// call, the host closing): once vigil has decided to stop the process, that
// line is logged at Info, saying so. A process that dies by itself is still
// an ERROR.
type exitLogger struct {
	hclog.Logger
	onPurpose atomic.Bool
	// lines is the rate-limited logger of the plugin's own lines (see
	// Named).
	lines *pluginLog
}

// newExitLogger is the logger of one process of the source.
func (s *Source) newExitLogger() *exitLogger {
	lim := &lineLimiter{total: &s.stats.droppedLogLines, now: time.Now}
	return &exitLogger{Logger: s.log, lines: &pluginLog{Logger: s.log, lim: lim}}
}

// Named is what go-plugin logs the plugin's stderr lines through: the
// rate-limited logger of its lines.
func (l *exitLogger) Named(name string) hclog.Logger { return l.lines.Named(name) }

func (l *exitLogger) Error(msg string, args ...any) {
	if msg == "plugin process exited" && l.onPurpose.Load() {
		l.Logger.Info("plugin process exited (stopped by vigil)", args...)
		return
	}
	l.Logger.Error(msg, args...)
}

// kill ends a process that launch gave up on.
func (l *exitLogger) kill(client *plugin.Client) {
	l.onPurpose.Store(true)
	client.Kill()
}

// launch starts the plugin binary and dispenses its VoteSource, or
// attaches to the process VIGIL_REATTACH_PLUGINS names for the source.
func (s *Source) launch() (*process, error) {
	if rc, key, err := s.reattachFor(); err != nil {
		return nil, err
	} else if rc != nil {
		return s.attach(rc, key)
	}
	path, err := resolve(s.spec.Plugin, s.spec.PluginDir)
	if err != nil {
		return nil, err
	}
	var secure *plugin.SecureConfig
	if s.checksum != nil {
		if err := verifyChecksum(path, s.checksum); err != nil {
			return nil, err
		}
		secure = &plugin.SecureConfig{Checksum: s.checksum, Hash: sha256.New()}
	}
	env, missing := hostEnv(s.spec.Env)
	if s.spec.PlaintextTransport {
		s.log.Warn("starting the plugin without mutual TLS (auto_mtls = false): its socket carries votes and configuration in plaintext", "plugin", path)
	}
	if len(missing) > 0 {
		s.log.Warn("environment variables named in env are not set in vigil's environment", "names", missing)
	}
	exitLog := s.newExitLogger()
	cmd := exec.Command(path)
	cmd.Env = env
	setDeathSignal(cmd)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  host.Handshake,
		VersionedPlugins: host.Plugins(nil),
		Cmd:              cmd,
		SecureConfig:     secure,
		SkipHostEnv:      true,
		AutoMTLS:         !s.spec.PlaintextTransport,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     s.startTimeout(),
		Logger:           exitLog,
		Stderr:           io.Discard,
		SyncStdout:       &lineWriter{log: exitLog.lines, stream: "stdout"},
		SyncStderr:       &lineWriter{log: exitLog.lines, stream: "stderr"},
	})
	rpc, err := client.Client()
	if err != nil {
		exitLog.kill(client)
		if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
			return nil, fmt.Errorf("plugin %q changed after its checksum was verified: refusing to start it%w", path, errChecksumMark)
		}
		if strings.Contains(err.Error(), "timeout while waiting for plugin to start") {
			return nil, fmt.Errorf("plugin %q did not finish its start within %v: it printed no go-plugin handshake; a vigil plugin calls sdk.Serve at once in main (anything slow belongs in Configure)", path, s.startTimeout())
		}
		return nil, fmt.Errorf("start plugin %q: %w", path, err)
	}
	raw, err := rpc.Dispense(host.PluginName)
	if err != nil {
		exitLog.kill(client)
		return nil, fmt.Errorf("plugin %q: %w", path, err)
	}
	src, ok := raw.(sdk.VoteSource)
	if !ok {
		exitLog.kill(client)
		return nil, fmt.Errorf("plugin %q does not serve a vote source", path)
	}
	watching, unwatch := context.WithCancel(context.Background())
	return &process{client: client, cmd: cmd, pid: cmd.Process.Pid, src: src, log: exitLog, watching: watching, unwatch: unwatch}, nil
}

func (s *Source) startTimeout() time.Duration {
	if s.spec.StartTimeout > 0 {
		return s.spec.StartTimeout
	}
	return DefaultStartTimeout
}

// stop ends a healthy process gracefully: go-plugin asks it to exit and
// kills it only if it does not within two seconds. Its exit is then not an
// error worth logging.
func (p *process) stop() {
	p.unwatch()
	if p.attached {
		p.detach()
		return
	}
	p.log.onPurpose.Store(true)
	p.client.Kill()
}

// kill ends the process at once (no graceful shutdown: it is broken or the
// host is closing) and waits for go-plugin's cleanup.
func (p *process) kill() {
	p.unwatch()
	if p.attached {
		p.detach()
		return
	}
	p.log.onPurpose.Store(true)
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
	p.client.Kill()
}

// detach lets an attached process go: the connection is closed, the
// process runs on.
func (p *process) detach() {
	closeConn(p.rpc)
	p.log.Info("let go of the plugin started by hand; it keeps running (vigil never stops it)", "pid", p.pid)
}
