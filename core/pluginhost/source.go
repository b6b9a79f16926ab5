package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilcdn/vigil/sdk"
)

// Defaults for the zero values of [Spec].
const (
	DefaultTimeout      = 10 * time.Second
	DefaultStartTimeout = 10 * time.Second
	DefaultMinBackoff   = time.Second
	DefaultMaxBackoff   = time.Minute
)

// Spec says how to run one vote source. It mirrors a `source` block.
type Spec struct {
	// Name is the source's name, used in logs, errors and diagnostics.
	Name string
	// Plugin is the binary's name (looked up in PluginDir, then PATH) or
	// its path (any value with a slash).
	Plugin string
	// PluginDir is the directory searched first for a bare Plugin name.
	PluginDir string
	// Checksum, when set, is "sha256:<hex>"; a binary with another sum is
	// refused before it starts.
	Checksum string
	// Env names the host environment variables passed to the plugin. The
	// plugin gets nothing else of the host's environment.
	Env []string
	// PlaintextTransport turns go-plugin's AutoMTLS off, for a plugin
	// that cannot do it: the host warns at every start.
	PlaintextTransport bool
	// Timeout is the deadline of every call to the plugin. Zero means
	// DefaultTimeout. A Vote past it costs the round's votes; the process
	// is killed only when the next Vote times out too.
	Timeout time.Duration
	// StartTimeout bounds the start of the plugin process (the go-plugin
	// handshake). Zero means DefaultStartTimeout. A restart runs in the
	// background: a Vote waits for it only up to its own deadline.
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between restarts of a plugin
	// that keeps failing: the first restart is immediate on the next use,
	// then the wait doubles from MinBackoff up to MaxBackoff. Zero means
	// DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Config is the source's `config { }` block; nil when there is none.
	Config hcl.Body
	// Range is where diagnostics point when they concern no config
	// attribute (a missing binary, a checksum mismatch): the source block
	// or its plugin attribute.
	Range hcl.Range
	// Logger receives the host's messages and the plugin's own log lines,
	// tagged with source=Name. Nil discards them.
	Logger hclog.Logger
	// OnSuspect, when set, is called with a site's name each time the
	// plugin reports, between rounds, that real traffic to one of the
	// site's origins is failing (the node gateway's passive trigger): the
	// engine then confirms that site early. It may be called from any
	// goroutine and must not block.
	OnSuspect func(site string)
}

// Stats counts what happened to a source since it was created. All fields
// only grow.
type Stats struct {
	// Calls is the number of Vote calls.
	Calls uint64
	// Failures is the number of Vote calls that produced no votes because
	// of the plugin: timeouts, crashes, plugin errors, failed restarts and
	// calls skipped while waiting to restart.
	Failures uint64
	// Timeouts, Crashes and PluginErrors split Failures by cause: the call
	// outlived its deadline; the process died or the connection broke; the
	// plugin returned an error.
	Timeouts, Crashes, PluginErrors uint64
	// Starts counts plugin processes started; Restarts those after the
	// first; StartFailures the starts that failed.
	Starts, Restarts, StartFailures uint64
	// DroppedVotes counts votes dropped as garbage: for a target not in the
	// ballot, with an invalid value or voter id, or duplicated.
	DroppedVotes uint64
	// Unsupported counts the targets the host did not hand the plugin
	// because they need a capability it did not declare (sdk.Info's
	// Capabilities): each got an Abstain vote from the host instead.
	Unsupported uint64
	// Suspects counts the plugin's suspects passed to Spec.OnSuspect;
	// DroppedSuspects those dropped: no OnSuspect, a site never in a
	// ballot of this source or a name too long, or over
	// MaxSuspectsPerSecond.
	Suspects, DroppedSuspects uint64
	// DroppedLogLines counts the plugin's log and output lines dropped
	// over MaxLogLinesPerSecond; TruncatedDetails the vote details cut to
	// MaxDetailBytes.
	DroppedLogLines, TruncatedDetails uint64
}

// Source runs one vote-source plugin. Its methods may be called from
// several goroutines; calls to the plugin are made one at a time.
//
// No call waits on the plugin past its own deadline: a Vote that finds the
// plugin down starts it again in the background and waits for it at most
// until the Vote's deadline; Close and Status never wait for a start.
type Source struct {
	spec     Spec
	log      hclog.Logger
	checksum []byte

	// calls lets one call into the plugin at a time; a caller gives up
	// waiting for it when its own context ends.
	calls chan struct{}

	mu         sync.Mutex // guards the fields below; never held across a call or a start
	proc       *process
	info       sdk.Info
	cfg        sdk.Config
	configured bool // Start succeeded once: cfg is valid
	closed     bool
	failStreak int           // consecutive failures
	lateStreak int           // consecutive timeouts of the running process
	retryAt    time.Time     // no restart before this
	starting   chan struct{} // closed when the restart in flight ends; nil when none
	startErr   error         // why the last restart failed

	stats struct {
		calls, failures, timeouts, crashes, pluginErrors atomic.Uint64
		starts, restarts, startFailures, droppedVotes    atomic.Uint64
		suspects, droppedSuspects, unsupported           atomic.Uint64
		droppedLogLines, truncatedDetails                atomic.Uint64
	}
	lacking string // the capabilities last warned of as missing, to warn once per change
	// metrics are the plugin's own series from its latest answer
	// (metrics.go); metricProblems what was last logged of those dropped.
	metrics        []sdk.Metric
	metricProblems string
	sus            suspects
}

// New returns a Source for spec. It starts nothing: call [Source.Start].
func New(spec Spec) *Source {
	log := spec.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Source{spec: spec, log: log.With("source", spec.Name), calls: make(chan struct{}, 1)}
}

func (s *Source) timeout() time.Duration {
	if s.spec.Timeout > 0 {
		return s.spec.Timeout
	}
	return DefaultTimeout
}

// Name returns the source's name.
func (s *Source) Name() string { return s.spec.Name }

// Info returns what the plugin said about itself at the last start.
func (s *Source) Info() sdk.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// Stats returns the source's counters.
func (s *Source) Stats() Stats {
	return Stats{
		Calls:         s.stats.calls.Load(),
		Failures:      s.stats.failures.Load(),
		Timeouts:      s.stats.timeouts.Load(),
		Crashes:       s.stats.crashes.Load(),
		PluginErrors:  s.stats.pluginErrors.Load(),
		Starts:        s.stats.starts.Load(),
		Restarts:      s.stats.restarts.Load(),
		StartFailures: s.stats.startFailures.Load(),
		DroppedVotes:  s.stats.droppedVotes.Load(),

		Suspects:        s.stats.suspects.Load(),
		DroppedSuspects: s.stats.droppedSuspects.Load(),
		Unsupported:     s.stats.unsupported.Load(),

		DroppedLogLines:  s.stats.droppedLogLines.Load(),
		TruncatedDetails: s.stats.truncatedDetails.Load(),
	}
}

// Start launches the plugin, asks for its info and config schema, decodes
// the config block against the schema and configures the plugin. Every
// problem comes back as a diagnostic; the source is usable only when none is
// an error. Start may be called again after a failure; after a success it
// returns nil and does nothing.
func (s *Source) Start(ctx context.Context) hcl.Diagnostics {
	if err := s.acquire(ctx); err != nil {
		return s.diag("Vote source busy", err.Error())
	}
	defer s.release()
	s.mu.Lock()
	closed, configured := s.closed, s.configured
	s.mu.Unlock()
	if closed {
		return s.diag("Vote source closed", "The source was closed; it cannot be started again.")
	}
	if configured {
		return nil
	}
	if s.spec.Checksum != "" {
		sum, err := parseChecksum(s.spec.Checksum)
		if err != nil {
			return s.diag("Invalid plugin checksum", err.Error())
		}
		s.checksum = sum
	}
	proc, err := s.launch()
	s.stats.starts.Add(1)
	if err != nil {
		s.stats.startFailures.Add(1)
		return s.launchDiag(err)
	}
	info, schema, err := s.describe(ctx, proc)
	if err != nil {
		proc.kill()
		s.stats.startFailures.Add(1)
		return s.diag("Vote-source plugin failed", err.Error())
	}
	cfg, diags := decodeConfig(s.spec.Config, schema, s.spec.Range)
	if diags.HasErrors() {
		proc.kill()
		return diags
	}
	if err := s.configure(ctx, proc, cfg); err != nil {
		proc.kill()
		var pds sdk.Diagnostics
		if errors.As(err, &pds) {
			body := s.spec.Config
			if body == nil {
				body = hcl.EmptyBody()
			}
			return append(diags, pluginDiagnostics(s.spec.Name, pds, attributeRanges(body, schema), s.spec.Range)...)
		}
		return append(diags, s.diag("Vote-source plugin failed", err.Error())...)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		proc.kill()
		return s.diag("Vote source closed", "The source was closed while it started.")
	}
	proc.info = info
	s.proc, s.info, s.cfg, s.configured = proc, info, cfg, true
	s.mu.Unlock()
	s.watch(proc)
	s.logStarted("vote source started", info, proc)
	return diags
}

func (s *Source) diag(summary, detail string) hcl.Diagnostics {
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf("Source %q: %s", s.spec.Name, detail),
		Subject:  s.spec.Range.Ptr(),
	}}
}

func (s *Source) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout())
}

// setupCall is the deadline of a call that starts a plugin (Info,
// ConfigSchema, Configure): the larger of the call timeout and the start
// timeout, since a plugin that just started on a busy machine may need
// more than a vote's time to answer its first calls.
func (s *Source) setupCall(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(s.timeout(), s.startTimeout()))
}

// info1 asks a started process for its Info.
func (s *Source) info1(proc *process) (sdk.Info, error) {
	cctx, cancel := s.setupCall(context.Background())
	defer cancel()
	info, err := proc.src.Info(cctx)
	if err != nil {
		return info, fmt.Errorf("plugin Info call: %w", err)
	}
	return info, nil
}

func (s *Source) describe(ctx context.Context, proc *process) (sdk.Info, sdk.Schema, error) {
	cctx, cancel := s.setupCall(ctx)
	defer cancel()
	info, err := proc.src.Info(cctx)
	if err != nil {
		return info, sdk.Schema{}, fmt.Errorf("plugin Info call: %w", err)
	}
	cctx2, cancel2 := s.setupCall(ctx)
	defer cancel2()
	schema, err := proc.src.ConfigSchema(cctx2)
	if err != nil {
		return info, schema, fmt.Errorf("plugin ConfigSchema call: %w", err)
	}
	return info, schema, nil
}

func (s *Source) configure(ctx context.Context, proc *process, cfg sdk.Config) error {
	cctx, cancel := s.setupCall(ctx)
	defer cancel()
	err := proc.src.Configure(cctx, cfg)
	var pds sdk.Diagnostics
	if err != nil && !errors.As(err, &pds) {
		return fmt.Errorf("plugin Configure call: %w", err)
	}
	return err
}

// logStarted logs a started process: its plugin, protocol, SDK and
// capabilities, and, for a protocol-1 plugin, what it is not handed.
func (s *Source) logStarted(msg string, info sdk.Info, proc *process) {
	s.log.Info(msg, "plugin", info.Name, "version", info.Version, "protocol", info.ProtocolVersion,
		"sdk", info.SDKVersion, "capabilities", strings.Join(info.Capabilities, ","), "pid", proc.pid)
	if info.ProtocolVersion < 2 {
		s.log.Warn("the plugin speaks vote-source protocol 1: it is not handed targets whose health check sets ca_file, tls_server_name, insecure_skip_tls_verify, headers, follow_redirects or max_body (the source abstains on them); rebuild it with SDK "+sdk.Version+" or later",
			"plugin", info.Name)
	}
}

// Vote hands the ballot to the plugin and returns its valid votes. An error
// means the source abstains on the whole ballot this round: the plugin is
// down, failed, timed out or crashed. Garbage votes are dropped, logged and
// counted, and the rest are returned. The whole call, a restart of the
// plugin included, ends by the source's deadline.
//
// A target that needs a capability the plugin did not declare (a
// protocol-1 plugin declares none) is not handed to it: the host casts an
// Abstain vote for it instead (voter HostVoter, sdk.ReasonUnsupported,
// plugin reason sdk.PluginReasonMissingCapability), returned with the
// plugin's votes.
func (s *Source) Vote(ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, error) {
	s.stats.calls.Add(1)
	s.remember(&ballot)
	cctx, cancel := s.call(ctx)
	defer cancel()
	if err := s.acquire(cctx); err != nil {
		s.stats.failures.Add(1)
		return nil, err
	}
	defer s.release()
	proc, err := s.ready(cctx)
	if err != nil {
		s.stats.failures.Add(1)
		return nil, err
	}
	// What this process declared, not what the last start said: a restart
	// may have run another binary.
	ballot, held := s.gate(proc.info, ballot)
	if len(ballot.Targets) == 0 && len(held) > 0 {
		return held, nil // nothing the plugin can be asked
	}
	votes, metrics, err := vote(proc, cctx, ballot)
	if err != nil {
		s.stats.failures.Add(1)
		return nil, s.failed(ctx, cctx, proc, err)
	}
	s.mu.Lock()
	s.failStreak, s.lateStreak = 0, 0
	s.mu.Unlock()
	s.keepMetrics(metrics)
	return append(s.keepValid(ballot, votes), held...), nil
}

// gate takes out of the ballot the targets the plugin lacks a capability
// for, and returns the host's abstentions on them.
func (s *Source) gate(info sdk.Info, ballot sdk.Ballot) (sdk.Ballot, []sdk.Vote) {
	out, held, missing := gate(info, ballot)
	if len(held) == 0 {
		return ballot, nil
	}
	s.stats.unsupported.Add(uint64(len(held)))
	names := slices.Sorted(maps.Keys(missing))
	key := strings.Join(names, ",")
	s.mu.Lock()
	warn := key != s.lacking
	s.lacking = key
	s.mu.Unlock()
	if warn {
		s.log.Warn("the plugin lacks capabilities some targets need: the source abstains on them (unsupported); vigil validate names their sites",
			"plugin", info.Name, "protocol", info.ProtocolVersion, "missing", key, "targets", len(held), "round", ballot.Round)
	}
	return out, held
}

// acquire waits for the plugin to be free, at most until ctx ends.
func (s *Source) acquire(ctx context.Context) error {
	select {
	case s.calls <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("source %q: the plugin was still busy with another call at the deadline", s.spec.Name)
	}
}

func (s *Source) release() { <-s.calls }

// ready returns the running process. When there is none it starts one in
// the background (unless the backoff says to wait) and waits for it until
// ctx ends; the start goes on after that and serves a later call.
func (s *Source) ready(ctx context.Context) (*process, error) {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, fmt.Errorf("source %q: closed", s.spec.Name)
	case !s.configured:
		s.mu.Unlock()
		return nil, fmt.Errorf("source %q: not started: Start must succeed first", s.spec.Name)
	}
	if s.proc != nil && !s.proc.client.Exited() {
		p := s.proc
		s.mu.Unlock()
		return p, nil
	}
	if s.proc != nil { // died between calls
		s.stats.crashes.Add(1)
		s.log.Error("vote source plugin exited; restarting it")
		s.dropLocked(s.proc)
	}
	if s.starting == nil {
		if wait := time.Until(s.retryAt); wait > 0 {
			s.mu.Unlock()
			return nil, fmt.Errorf("source %q: plugin down after %d failures in a row, next restart in %v", s.spec.Name, s.failStreak, wait.Round(time.Millisecond))
		}
		s.starting = make(chan struct{})
		go s.restart(s.starting)
	}
	started := s.starting
	s.mu.Unlock()
	select {
	case <-started:
	case <-ctx.Done():
		return nil, fmt.Errorf("source %q: the plugin is restarting and was not ready by the deadline; its start goes on in the background (at most %v)", s.spec.Name, s.startTimeout())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil, fmt.Errorf("source %q: restart failed: %w", s.spec.Name, s.startErr)
	}
	return s.proc, nil
}

// restart starts the plugin again and configures it, bounded by the start
// timeout and the call deadline, then closes done.
func (s *Source) restart(done chan struct{}) {
	s.stats.starts.Add(1)
	s.stats.restarts.Add(1)
	proc, err := s.launch()
	var info sdk.Info
	if err == nil {
		s.mu.Lock()
		cfg := s.cfg
		s.mu.Unlock()
		// Info again: the binary may have been replaced by another
		// version, of another protocol or with other capabilities.
		if info, err = s.info1(proc); err == nil {
			err = s.configure(context.Background(), proc, cfg)
		}
		if err != nil {
			proc.kill()
		}
	}
	s.mu.Lock()
	defer func() {
		s.starting = nil
		s.mu.Unlock()
		close(done)
	}()
	if err != nil {
		s.stats.startFailures.Add(1)
		s.failStreak++
		wait := s.backoff()
		s.retryAt = time.Now().Add(wait)
		s.startErr = err
		s.log.Error("restarting vote source failed", "error", err, "retry_in", wait)
		return
	}
	if s.closed {
		go proc.kill()
		return
	}
	s.logStarted("vote source restarted", info, proc)
	proc.info = info
	s.proc, s.info, s.lacking = proc, info, ""
	s.watch(proc)
}

// failed classifies a failed call, kills the plugin when it is broken and
// returns the error for the caller.
func (s *Source) failed(ctx, cctx context.Context, proc *process, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		// The caller gave up (shutdown): not the plugin's fault.
		return fmt.Errorf("source %q: %w", s.spec.Name, err)
	case cctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded:
		// The deadline travels with the call: the plugin's side can give
		// up (and say DeadlineExceeded) a hair before our own timer fires.
		s.stats.timeouts.Add(1)
		if s.keepLate(proc) {
			s.log.Warn("vote source timed out; its process is kept (one late answer is slowness, not a hang): a second timeout in a row restarts it", "timeout", s.timeout())
			return fmt.Errorf("source %q: no answer within %v: the plugin is kept, and restarted if its next call times out too", s.spec.Name, s.timeout())
		}
		s.log.Warn("vote source timed out twice in a row; killing it, it restarts on next use", "timeout", s.timeout())
		s.drop(proc)
		return fmt.Errorf("source %q: no answer within %v for the second call in a row: the plugin was killed and restarts on next use", s.spec.Name, s.timeout())
	case crashed(proc, err):
		s.stats.crashes.Add(1)
		s.log.Error("vote source crashed or broke the connection; it restarts on next use", "error", err)
		s.drop(proc)
		return fmt.Errorf("source %q: plugin crashed: %w", s.spec.Name, err)
	default:
		// Any other status is the plugin's answer for this round: it
		// keeps running and is asked again next round.
		st := status.Convert(err)
		s.stats.pluginErrors.Add(1)
		msg := st.Message()
		if st.Code() != codes.Unknown {
			msg += " (" + st.Code().String() + ")"
		}
		s.log.Warn("vote source returned an error", "error", msg)
		return fmt.Errorf("source %q: plugin error: %s", s.spec.Name, msg)
	}
}

// keepLate counts a timeout of proc and reports whether proc is kept. A
// plugin that misses one deadline is slow (a loaded machine, a large
// ballot), not hung: killing it would make the next round pay for its
// restart too, and on a busy machine miss that deadline as well. The
// second timeout in a row, or a process that is gone, restarts it.
func (s *Source) keepLate(proc *process) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != proc || proc.client.Exited() {
		return false
	}
	s.lateStreak++
	return s.lateStreak < 2
}

// crashed reports whether a failed call means the plugin is broken and
// must be restarted: its process is gone, or the call ended with
// Unavailable, which is what gRPC says when the connection or the stream
// broke (and what a plugin says when it cannot serve at all). Every other
// status is an error the plugin answered on purpose (documented in
// sdk/PROTOCOL.md, section 4).
func crashed(proc *process, err error) bool {
	return status.Code(err) == codes.Unavailable || proc.client.Exited()
}

// drop kills proc, if it is still the current process, and schedules the
// restart.
func (s *Source) drop(proc *process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(proc)
}

func (s *Source) dropLocked(proc *process) {
	if s.proc != proc || proc == nil {
		return
	}
	s.proc = nil
	s.lateStreak = 0
	go proc.kill() // go-plugin's cleanup may take a moment: not under the lock
	s.failStreak++
	s.retryAt = time.Now().Add(s.backoff())
}

// backoff is the wait before the next restart after failStreak consecutive
// failures: none after the first, then MinBackoff doubling to MaxBackoff,
// as the library's exponential backoff steps them (replayed from the
// streak, so that the wait is a function of it alone).
func (s *Source) backoff() time.Duration {
	if s.failStreak <= 1 {
		return 0
	}
	lo, hi := s.spec.MinBackoff, s.spec.MaxBackoff
	if lo <= 0 {
		lo = DefaultMinBackoff
	}
	if hi <= 0 {
		hi = DefaultMaxBackoff
	}
	// No jitter (RandomizationFactor 0): one host restarts its own plugin.
	b := &backoff.ExponentialBackOff{InitialInterval: lo, Multiplier: 2, MaxInterval: hi}
	d := b.NextBackOff()
	for i := 2; i < s.failStreak && d < hi; i++ {
		d = b.NextBackOff()
	}
	return min(d, hi)
}

// PID returns the process id of the running plugin, or 0 when none runs.
func (s *Source) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid
}

// Close stops the plugin. The Source cannot be used afterwards. Close
// does not wait for a call or a restart in flight: the call fails, and a
// process still starting is killed as soon as its start ends.
func (s *Source) Close() {
	s.mu.Lock()
	s.closed = true
	proc := s.proc
	s.proc = nil
	s.mu.Unlock()
	if proc != nil {
		proc.stop()
	}
}
