package notify

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/store"
)

// LogName is the notifier name of the log: its delivery cursor in the store
// and its label in the metrics. No webhook may be named so.
const LogName = "(log)"

// Defaults of the options.
const (
	DefaultRetryMin       = time.Second
	DefaultRetryMax       = time.Minute
	DefaultMaxRetryAfter  = 15 * time.Minute
	DefaultSafetyInterval = 30 * time.Second
	batchSize             = 100
)

type options struct {
	retryMin, retryMax time.Duration
	maxRetryAfter      time.Duration
	externalURL        func() string
	states             AlertStates
	control            *Control
	safety             time.Duration
	now                func() time.Time
}

// Option changes a Dispatcher's defaults.
type Option func(*options)

// WithRetryWait sets the exponential backoff between webhook attempts: the
// first retry waits about minWait, each next one twice as long, up to
// maxWait (defaults DefaultRetryMin and DefaultRetryMax).
func WithRetryWait(minWait, maxWait time.Duration) Option {
	return func(o *options) { o.retryMin, o.retryMax = minWait, maxWait }
}

// WithExternalURL is the address the API and the status page are reached
// at (such as "https://vigil.example.net:8470"), asked for each time it is
// needed (the API's address may be known only once it listens): the
// alerts of an Alertmanager notifier without external_url link to the
// site's status page in their generatorURL.
func WithExternalURL(u func() string) Option { return func(o *options) { o.externalURL = u } }

// WithSafetyInterval sets how often each notifier looks at the journal
// without being woken (default DefaultSafetyInterval).
func WithSafetyInterval(d time.Duration) Option { return func(o *options) { o.safety = d } }

// Dispatcher delivers the journal's notices to the log and to every
// configured webhook, each at its own pace from its own stored cursor.
type Dispatcher struct {
	store   store.Store
	log     hclog.Logger
	opts    options
	metrics *metrics
	// head is the newest journal Seq seen, for the lag metric.
	head atomic.Uint64
	// workers is the running notifiers, read without locks by Wake and the
	// lag metric.
	workers atomic.Pointer[[]*worker]

	mu        sync.Mutex // serialises Run's start and stop and Reconfigure
	notifiers []*config.Notifier
	runCtx    context.Context // nil when not running
}

// worker is one notifier's goroutine: the log, or one webhook.
type worker struct {
	name   string
	cfg    *config.Notifier // nil for the log
	hook   *webhook         // a webhook's
	alerts *alertSender     // an Alertmanager notifier's: no cursor
	wake   chan struct{}
	cursor atomic.Uint64
	dirty  bool // cursor ahead of the stored one; worker goroutine only
	cancel context.CancelFunc
	done   chan struct{}
}

// New checks the notifiers and returns a Dispatcher for them; Run starts
// it. logger receives the notices (one line each) and the delivery
// problems; webhook URLs never appear in it, only their scheme and host.
func New(st store.Store, notifiers []*config.Notifier, logger hclog.Logger, opts ...Option) (*Dispatcher, error) {
	if st == nil {
		return nil, errors.New("notify: no store")
	}
	if err := checkNotifiers(notifiers); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	d := &Dispatcher{
		store: st,
		log:   logger,
		opts: options{
			retryMin:      DefaultRetryMin,
			retryMax:      DefaultRetryMax,
			maxRetryAfter: DefaultMaxRetryAfter,
			safety:        DefaultSafetyInterval,
			now:           time.Now,
		},
		notifiers: slices.Clone(notifiers),
	}
	for _, o := range opts {
		o(&d.opts)
	}
	if d.opts.safety <= 0 {
		d.opts.safety = DefaultSafetyInterval
	}
	if d.opts.retryMin <= 0 {
		d.opts.retryMin = DefaultRetryMin
	}
	if d.opts.retryMax < d.opts.retryMin {
		d.opts.retryMax = max(DefaultRetryMax, d.opts.retryMin)
	}
	if d.opts.maxRetryAfter <= 0 {
		d.opts.maxRetryAfter = DefaultMaxRetryAfter
	}
	d.metrics = newMetrics(d)
	return d, nil
}

func checkNotifiers(ns []*config.Notifier) error {
	seen := map[string]bool{}
	for i, n := range ns {
		if n == nil {
			return fmt.Errorf("notify: notifier %d is nil", i)
		}
		if n.Name == "" || n.Name == LogName {
			return fmt.Errorf("notify: notifier %q: the name must be set and must not be %q (the log's cursor)", n.Name, LogName)
		}
		if seen[n.Name] {
			return fmt.Errorf("notify: notifier %q is declared twice; names key the delivery cursors and must be unique", n.Name)
		}
		seen[n.Name] = true
		switch n.Kind {
		case config.NotifierWebhook, "":
			if _, err := webhookURL(n); err != nil {
				return fmt.Errorf("notify: %w", err)
			}
			if _, err := newFormatter(n.Format); err != nil {
				return fmt.Errorf("notify: notifier %q: %w", n.Name, err)
			}
		case config.NotifierAlertmanager:
			if len(n.URLs) == 0 {
				return fmt.Errorf("notify: notifier %q: no Alertmanager url", n.Name)
			}
			for _, u := range n.URLs {
				if err := config.CheckWebhookURL(u); err != nil {
					return fmt.Errorf("notify: notifier %q: the Alertmanager url %s (got one for %s)", n.Name, err, target(u))
				}
			}
		default:
			return fmt.Errorf("notify: notifier %q: kind %q is not known; the kinds are \"webhook\" and \"alertmanager\"", n.Name, n.Kind)
		}
		if _, err := notifierHeaders(n); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
	return nil
}

// Collectors returns the dispatcher's Prometheus collectors, to register
// once: vigil_notify_deliveries_total{notifier,outcome},
// vigil_notify_retries_total{notifier}, vigil_notify_lost_events_total{notifier},
// vigil_notify_store_errors_total{notifier} and vigil_notify_lag_events{notifier}.
func (d *Dispatcher) Collectors() []prometheus.Collector { return d.metrics.collectors() }

// Wake tells every notifier that the journal has new events. It never
// blocks: the engine calls it after each commit that wrote events.
func (d *Dispatcher) Wake() {
	for _, w := range d.current() {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (d *Dispatcher) current() []*worker {
	if p := d.workers.Load(); p != nil {
		return *p
	}
	return nil
}

// Run delivers until ctx ends, then stops every notifier (a delivery in
// flight is abandoned and will be made again by the next Run: at least
// once) and returns nil. It returns an error only when it cannot start:
// the delivery cursors cannot be loaded, or it is already running. Stop Run
// before closing the store.
func (d *Dispatcher) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.runCtx != nil {
		d.mu.Unlock()
		return errors.New("notify: the dispatcher is already running")
	}
	st, err := d.loadCursors(ctx)
	if err != nil {
		d.mu.Unlock()
		return fmt.Errorf("notify: loading the delivery cursors: %w", err)
	}
	d.runCtx = ctx
	d.observe(st.Meta.LastEvent)
	ws := []*worker{d.start(ctx, LogName, nil, st)}
	for _, n := range d.notifiers {
		ws = append(ws, d.start(ctx, n.Name, n, st))
	}
	// Publish a slice of its own: Wake reads it without locks, so nothing
	// may write through this pointer afterwards (Reconfigure stores a new
	// one).
	running := ws
	d.workers.Store(&running)
	d.mu.Unlock()

	<-ctx.Done()

	d.mu.Lock()
	defer d.mu.Unlock()
	stopping := d.current()
	for _, w := range stopping {
		w.cancel()
	}
	for _, w := range stopping {
		<-w.done
	}
	d.workers.Store(nil)
	d.runCtx = nil
	return nil
}

// Reconfigure replaces the webhooks, as on a configuration reload. A
// notifier whose name, url, format and timeout are unchanged keeps running
// undisturbed; a changed one restarts from its stored cursor (its notice in
// flight may be delivered twice); a removed one stops (its stored cursor
// stays in the store); a new one starts with the events after the newest
// one in the journal. The notifiers are checked first: on an error nothing
// changes.
func (d *Dispatcher) Reconfigure(notifiers []*config.Notifier) error {
	if err := checkNotifiers(notifiers); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.notifiers = slices.Clone(notifiers)
	if d.runCtx == nil {
		return nil
	}
	want := map[string]*config.Notifier{}
	for _, n := range notifiers {
		want[n.Name] = n
	}
	kept := map[string]*worker{}
	var logw *worker
	for _, w := range d.current() {
		if w.cfg == nil {
			logw = w
			continue
		}
		if n, ok := want[w.name]; ok && sameNotifier(n, w.cfg) {
			kept[w.name] = w
			continue
		}
		w.cancel()
		<-w.done
		if _, ok := want[w.name]; !ok {
			d.metrics.forget(w.name)
		}
	}
	var st *store.State
	ws := []*worker{logw}
	for _, n := range notifiers {
		if w, ok := kept[n.Name]; ok {
			w.cfg = n
			ws = append(ws, w)
			continue
		}
		if st == nil {
			var err error
			if st, err = d.loadCursors(d.runCtx); err != nil {
				// Run what is kept; the rest starts on the next reload.
				d.workers.Store(&ws)
				return fmt.Errorf("notify: loading the delivery cursors: %w", err)
			}
		}
		ws = append(ws, d.start(d.runCtx, n.Name, n, st))
	}
	d.workers.Store(&ws)
	return nil
}

// sameNotifier says whether a reload leaves a notifier as it runs: every
// setting equal (where it is declared does not count).
func sameNotifier(a, b *config.Notifier) bool {
	x, y := *a, *b
	x.DeclRange, y.DeclRange = hcl.Range{}, hcl.Range{}
	return reflect.DeepEqual(x, y)
}

// start places a notifier's cursor and starts its goroutine. A notifier
// with no stored cursor starts after the newest journal event, and that
// place is stored at once so that a restart does not skip what follows.
func (d *Dispatcher) start(ctx context.Context, name string, n *config.Notifier, st *store.State) *worker {
	w := &worker{name: name, cfg: n, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if n != nil && n.Kind == config.NotifierAlertmanager {
		// States, not the journal: no cursor to place.
		w.alerts, _ = newAlertSender(d, n) // checkNotifiers has vetted it
		wctx, cancel := context.WithCancel(ctx)
		w.cancel = cancel
		go d.runAlerts(wctx, w)
		return w
	}
	if n != nil {
		// checkNotifiers has vetted the format.
		w.hook, _ = newWebhook(n, &d.opts, d.log, d.metrics)
	}
	cur, ok := st.Cursors[name]
	switch {
	case !ok:
		w.cursor.Store(st.Meta.LastEvent)
		d.save(ctx, w)
		d.log.Info("new notifier: it starts with the events after the newest in the journal", "notifier", name, "after_seq", st.Meta.LastEvent)
	case cur > st.Meta.LastEvent:
		w.cursor.Store(st.Meta.LastEvent)
		d.save(ctx, w)
		d.log.Warn("the notifier's cursor is ahead of the journal (was the data restored?); it restarts after the newest event", "notifier", name, "cursor", cur, "last_event", st.Meta.LastEvent)
	default:
		w.cursor.Store(cur)
	}
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	go d.run(wctx, w)
	return w
}

// run is one notifier's loop: drain the journal, then wait for Wake or the
// safety tick.
func (d *Dispatcher) run(ctx context.Context, w *worker) {
	defer close(w.done)
	if w.hook != nil {
		defer w.hook.close()
	}
	tick := time.NewTicker(d.opts.safety)
	defer tick.Stop()
	for {
		if err := d.drain(ctx, w); err != nil && ctx.Err() == nil {
			d.metrics.storeErrs.WithLabelValues(w.name).Inc()
			d.log.Warn("cannot read the event journal; trying again at the next wake", "notifier", w.name, "error", err)
		}
		select {
		case <-ctx.Done():
			if w.dirty {
				d.save(ctx, w)
			}
			return
		case <-w.wake:
		case <-tick.C:
		}
	}
}

// LogLineLimit is how many events the log writes one by one in one pass
// over the journal; the rest of the pass is counted in one line, so that a
// fleet-wide incident does not bury the log (GET /v1/events and vigil
// events have every one).
const LogLineLimit = 50

// drain handles every journal event after the worker's cursor, in order.
func (d *Dispatcher) drain(ctx context.Context, w *worker) error {
	logged, unlogged := 0, 0
	defer func() {
		if unlogged > 0 {
			d.log.Warn("more events at once than are logged one by one; vigil events (GET /v1/events) has them all",
				"logged", logged, "not_logged", unlogged)
		}
	}()
	for ctx.Err() == nil {
		after := w.cursor.Load()
		evs, err := d.store.Events(ctx, after, "", batchSize)
		if err != nil {
			return fmt.Errorf("reading the events after seq %d: %w", after, err)
		}
		if len(evs) == 0 {
			return nil
		}
		d.observe(evs[len(evs)-1].Seq)
		if first := evs[0].Seq; first > after+1 {
			lost := first - after - 1
			d.metrics.lost.WithLabelValues(w.name).Add(float64(lost))
			d.log.Error("notices lost: this notifier fell behind the event journal, which keeps only the newest events; see the metric vigil_notify_lag_events",
				"notifier", w.name, "lost_events", lost, "first_lost_seq", after+1, "last_lost_seq", first-1)
		}
		for _, e := range evs {
			if w.hook == nil {
				if logged < LogLineLimit {
					d.logNotice(e)
					logged++
				} else {
					unlogged++
				}
				d.metrics.deliveries.WithLabelValues(w.name, "delivered").Inc()
				w.cursor.Store(e.Seq)
				w.dirty = true
				continue
			}
			sent, out := w.hook.deliver(ctx, e)
			if out == stopped {
				return nil
			}
			// Delivered (2xx), rejected for good, or nothing to send.
			w.cursor.Store(e.Seq)
			w.dirty = true
			if sent {
				d.save(ctx, w)
			}
		}
		if w.dirty {
			d.save(ctx, w)
		}
		if len(evs) < batchSize {
			return nil
		}
	}
	return nil
}

// save stores the worker's cursor. It is written even while stopping (the
// cursor only ever covers handled events); a failure is logged, and the
// events after the stored cursor are handled again after a restart.
func (d *Dispatcher) save(ctx context.Context, w *worker) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	seq := w.cursor.Load()
	if err := d.store.SetCursor(sctx, w.name, seq); err != nil {
		d.metrics.storeErrs.WithLabelValues(w.name).Inc()
		d.log.Warn("cannot store the delivery cursor; these notices may be sent again after a restart", "notifier", w.name, "seq", seq, "error", err)
		return
	}
	w.dirty = false
}

func (d *Dispatcher) observe(seq uint64) {
	for {
		h := d.head.Load()
		if seq <= h || d.head.CompareAndSwap(h, seq) {
			return
		}
	}
}

// logNotice writes one notice as one log line: the title as the message,
// the rest as fields. Critical notices log at error level, warnings at
// warn, the rest at info.
func (d *Dispatcher) logNotice(e store.Event) {
	n := NoticeOf(e)
	args := []any{"site", n.Site, "kind", n.Kind, "seq", n.Seq, "time", n.Time.Format(time.RFC3339Nano)}
	if n.Reason != "" {
		args = append(args, "reason", n.Reason)
	}
	for _, f := range []struct {
		k string
		v int
	}{{"from_level", n.Levels.From}, {"to_level", n.Levels.To}, {"level", n.Levels.Current}, {"available_level", n.Levels.Available}} {
		if f.v != 0 {
			args = append(args, f.k, f.v)
		}
	}
	if n.Origin != nil {
		args = append(args, "origin", n.Origin.Name, "from_state", n.Origin.From, "to_state", n.Origin.To)
	}
	if n.Actor != "" {
		args = append(args, "actor", n.Actor)
	}
	args = append(args, "text", n.Text)
	switch n.Severity {
	case SeverityCritical:
		d.log.Error(n.Title, args...)
	case SeverityWarning:
		d.log.Warn(n.Title, args...)
	default:
		d.log.Info(n.Title, args...)
	}
}

// loadCursors reads the counters and the delivery cursors (not the sites:
// a fleet's worth of records is not what a notifier needs).
func (d *Dispatcher) loadCursors(ctx context.Context) (*store.State, error) {
	meta, cursors, err := d.store.Cursors(ctx)
	if err != nil {
		return nil, err
	}
	return &store.State{Meta: meta, Cursors: cursors}, nil
}
