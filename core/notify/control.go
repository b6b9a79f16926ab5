package notify

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"

	"github.com/vigilcdn/vigil/core/store/etcdstore"
)

// The alertnames of the control plane's own alerts: conditions of the
// agent itself, not of a site. They are kept out of the journal, since
// they must go out when nothing can be saved.
const (
	// AlertStateNotSaved fires while the state store refuses commits:
	// nothing unsaved is published, so no failover reaches the edges.
	AlertStateNotSaved = "VigilStateNotSaved"
	// AlertStoreOnReserve fires while data_dir is full and the state
	// file writes into its space reserve.
	AlertStoreOnReserve = "VigilStoreOnReserve"
)

// The reason classes of a failed commit: the reason label of
// VigilStateNotSaved and of vigil_commit_failures_total.
const (
	// ReasonDiskFull: the filesystem of data_dir is full (ENOSPC, or the
	// user's quota, EDQUOT).
	ReasonDiskFull = "disk_full"
	// ReasonEtcdRefused: etcd answered the write with an error (no
	// leader, too many operations in one transaction, its own space
	// quota, permission).
	ReasonEtcdRefused = "etcd_refused"
	// ReasonFenced: the etcd store's fence refused the write: this
	// instance lost its role to another, which saves from then on.
	ReasonFenced = "fenced"
	// ReasonOther: anything else (such as a store that did not answer in
	// time).
	ReasonOther = "other"
)

// FailureReasons are the reason classes, in the order they are checked.
var FailureReasons = []string{ReasonFenced, ReasonDiskFull, ReasonEtcdRefused, ReasonOther}

// CommitFailureReason classifies the error of a failed commit by its kind
// (errors.Is and errors.As on the error chain), never by its words.
func CommitFailureReason(err error) string {
	var etcdErr rpctypes.EtcdError
	switch {
	case errors.Is(err, etcdstore.ErrFenced):
		return ReasonFenced
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return ReasonDiskFull
	case errors.As(err, &etcdErr):
		return ReasonEtcdRefused
	}
	if _, ok := status.FromError(err); ok && err != nil {
		return ReasonEtcdRefused // a gRPC status: etcd's own answer
	}
	return ReasonOther
}

// ControlOptions configure a Control.
type ControlOptions struct {
	// Instance names this agent in the alerts' instance label (the host
	// name when empty).
	Instance string
	// DataDir is the bbolt store's data_dir ("" with etcd), named in the
	// alerts' description and command.
	DataDir string
	// Logger receives a line when a condition starts and when it ends.
	Logger hclog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Control holds the control plane's own alerting conditions: the state
// that cannot be saved, and the store that writes into its space
// reserve. The engine and the store tell it what happens (CommitFailed,
// CommitSaved, ReserveReleased, ReserveRestored); the Alertmanager
// notifiers of the Dispatchers given it (WithControl) read it and post
// VigilStateNotSaved and VigilStoreOnReserve directly, without the
// journal. Its methods are safe for concurrent use and never block on
// I/O: the engine calls them with its lock held.
type Control struct {
	opts     ControlOptions
	log      hclog.Logger
	failures *prometheus.CounterVec

	mu       sync.Mutex
	notSaved *notSaved     // nil while commits succeed
	reserve  *reserveUse   // nil while the reserve is held
	changed  chan struct{} // closed and replaced at each change
}

// notSaved is a run of failed commits.
type notSaved struct {
	reason string
	since  time.Time
	count  int
	err    string // the last error's text
}

// reserveUse is the store writing into its space reserve.
type reserveUse struct {
	since time.Time
	size  int64
}

// NewControl returns a Control with no condition.
func NewControl(opts ControlOptions) *Control {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	c := &Control{opts: opts, log: opts.Logger, changed: make(chan struct{}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_commit_failures_total",
			Help: "Commits of the state that failed, by reason class: disk_full, etcd_refused, fenced or other.",
		}, []string{"reason"})}
	for _, r := range FailureReasons {
		c.failures.WithLabelValues(r)
	}
	return c
}

// Collectors returns vigil_commit_failures_total, to register once.
func (c *Control) Collectors() []prometheus.Collector { return []prometheus.Collector{c.failures} }

// WithControl makes the Alertmanager notifiers post the control plane's
// own alerts from c, and wake as soon as one starts or ends.
func WithControl(c *Control) Option { return func(o *options) { o.control = c } }

// CommitFailed records a failed commit: VigilStateNotSaved fires from
// the first one (a fenced commit excepted: the instance lost its role,
// and the one that took it saves; it ends the condition here instead).
func (c *Control) CommitFailed(err error) {
	if err == nil {
		return
	}
	reason := CommitFailureReason(err)
	c.failures.WithLabelValues(reason).Inc()
	text := scrubURLs(err.Error())
	c.mu.Lock()
	defer c.mu.Unlock()
	if reason == ReasonFenced {
		c.endNotSavedLocked("this instance lost its role; the instance that took it saves the state")
		return
	}
	if ns := c.notSaved; ns != nil && ns.reason == reason {
		ns.count++
		ns.err = text
		return
	}
	c.notSaved = &notSaved{reason: reason, since: c.opts.Now(), count: 1, err: text}
	c.log.Error("the state cannot be saved, so nothing of it is published: no failover reaches the edges until a commit succeeds; Alertmanager notifiers are sent "+AlertStateNotSaved,
		"reason", reason, "error", text)
	c.changedLocked()
}

// CommitSaved records a commit that succeeded: VigilStateNotSaved is
// resolved.
func (c *Control) CommitSaved() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endNotSavedLocked("")
}

func (c *Control) endNotSavedLocked(why string) {
	ns := c.notSaved
	if ns == nil {
		return
	}
	c.notSaved = nil
	args := []any{"reason", ns.reason, "failed_commits", ns.count, "for", c.opts.Now().Sub(ns.since).Round(time.Millisecond).String()}
	if why != "" {
		args = append(args, "why", why)
	}
	c.log.Info("the state is saved again; "+AlertStateNotSaved+" is resolved", args...)
	c.changedLocked()
}

// ReserveReleased records that the store deleted its space reserve to
// commit on a full data_dir: VigilStoreOnReserve fires.
func (c *Control) ReserveReleased(size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reserve != nil {
		return
	}
	c.reserve = &reserveUse{since: c.opts.Now(), size: size}
	c.changedLocked()
}

// ReserveRestored records that the store wrote its reserve again:
// VigilStoreOnReserve is resolved.
func (c *Control) ReserveRestored() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reserve == nil {
		return
	}
	c.reserve = nil
	c.changedLocked()
}

func (c *Control) changedLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// watch returns a channel closed at the next change.
func (c *Control) watch() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// controlState is a copy of the conditions, for one send.
type controlState struct {
	notSaved *notSaved
	reserve  *reserveUse
}

func (c *Control) state() controlState {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s controlState
	if c.notSaved != nil {
		ns := *c.notSaved
		s.notSaved = &ns
	}
	if c.reserve != nil {
		r := *c.reserve
		s.reserve = &r
	}
	return s
}

// instance is the instance label.
func (c *Control) instance() string {
	if c.opts.Instance != "" {
		return c.opts.Instance
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "vigil"
}

// maxErrorText bounds the error text an alert carries.
const maxErrorText = 1000

// controlAlerts are the alerts of the conditions now, each with scrub
// applied to the error text it carries.
func (s *alertSender) controlAlerts(add func(*Alert)) {
	c := s.opts.control
	if c == nil {
		return
	}
	st := c.state()
	inst := c.instance()
	dir := c.opts.DataDir
	mk := func(name, severity, summary, description string, since time.Time) *Alert {
		a := &Alert{
			Labels: map[string]string{
				"alertname": name,
				"instance":  inst,
				"vigil":     s.n.Installation,
				"severity":  severity,
			},
			Annotations: map[string]string{"summary": summary, "description": description},
			StartsAt:    since,
		}
		if a.Labels["vigil"] == "" {
			a.Labels["vigil"] = "vigil"
		}
		if base := s.externalURL(); base != "" {
			a.GeneratorURL = base + "/"
		}
		return a
	}
	if ns := st.notSaved; ns != nil {
		what := map[string]string{
			ReasonDiskFull:    "the filesystem of data_dir is full",
			ReasonEtcdRefused: "etcd refuses the writes",
			ReasonOther:       "the store returns errors",
		}[ns.reason]
		desc := fmt.Sprintf("Since %s, the commits of the state fail (%d so far): %s. Nothing unsaved is published, so no failover, failback or manual switch reaches the edges until a commit succeeds; the rounds go on and are saved by the first commit that succeeds. Last error: %s",
			ns.since.UTC().Format(time.RFC3339), ns.count, what, s.scrub(ns.err))
		a := mk(AlertStateNotSaved, SeverityCritical, fmt.Sprintf("vigil on %s cannot save its state (%s)", inst, ns.reason), desc, ns.since)
		a.Labels["reason"] = ns.reason
		switch {
		case ns.reason == ReasonDiskFull && dir != "":
			a.Annotations["command"] = "df -h " + shellWord(dir)
		case ns.reason == ReasonEtcdRefused:
			a.Annotations["command"] = "etcdctl endpoint status --cluster -w table"
		}
		add(a)
	}
	if r := st.reserve; r != nil {
		where := "data_dir"
		if dir != "" {
			where += " " + dir
		}
		desc := fmt.Sprintf("Since %s, %s is full and the state file writes into its space reserve (%d MiB): rounds, failovers and actions are still saved and published. Free space there: the last-good copies are not written meanwhile, and the reserve is written again (and this alert resolved) within a minute of there being room.",
			r.since.UTC().Format(time.RFC3339), where, r.size>>20)
		a := mk(AlertStoreOnReserve, SeverityWarning, fmt.Sprintf("data_dir of vigil on %s is full; the state file uses its space reserve", inst), desc, r.since)
		if dir != "" {
			a.Annotations["command"] = "df -h " + shellWord(dir)
		}
		add(a)
	}
}

// scrub removes from text what may be secret: every URL but its scheme
// and host, this notifier's URLs and their parts, and its header values.
func (s *alertSender) scrub(text string) string {
	for _, base := range s.n.URLs {
		text = newRedactor(base).String(text)
	}
	for _, vs := range s.headers {
		for _, v := range vs {
			if len(v) >= 3 {
				text = strings.ReplaceAll(text, v, "REDACTED")
			}
		}
	}
	text = scrubURLs(text)
	if len(text) > maxErrorText {
		text = text[:maxErrorText] + "…"
	}
	return text
}

// urlInText finds URLs in error text.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// scrubURLs replaces each URL in text by its scheme and host: user info,
// paths and queries may hold credentials.
func scrubURLs(text string) string {
	return urlInText.ReplaceAllStringFunc(text, func(u string) string {
		trimmed := strings.TrimRight(u, ".,;:)]")
		t := target(trimmed)
		if t == "(invalid url)" {
			t = "(url)"
		}
		return t + u[len(trimmed):]
	})
}

// shellWord quotes s for a shell command when it needs it.
func shellWord(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
