package failoverreport

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// Switch is a failover as the engine decided it.
type Switch struct {
	Site               string
	FromLevel, ToLevel int
	Drill              bool
	// Seq is the journal sequence number of the level_switched event,
	// Round its round, and RoundStarted the round's start (the event's
	// time in the journal).
	Seq, Round   uint64
	RoundStarted time.Time
	// Origin is the origin whose failure made FromLevel unhealthy, and
	// FirstFailure the start of the first round that counted a failure
	// for it in a row (zero: unknown, as after a restart).
	Origin       string
	FirstFailure time.Time
	// Decided is when the round decided the switch.
	Decided time.Time
}

// Options configure a Tracker.
type Options struct {
	// Registerer receives the histograms (none when nil).
	Registerer prometheus.Registerer
	// Wait is how long after the publication the nodes' reports are
	// waited for (default api.FailoverReportWait).
	Wait time.Duration
	// Keep is how many complete reports are kept per site in memory
	// (default 32); older ones are in the journal only.
	Keep int
	// Sites bounds the sites whose reports are kept in memory (default
	// 4096); the site whose newest report is the oldest goes first.
	Sites int
	// NodeTTL is how long a node stays known (expected in the reports)
	// after its last acknowledgement (default 24h): a node taken out of
	// service stops being listed as not reported. Nodes bounds how many
	// are known (default 10000; the one heard from longest ago goes).
	NodeTTL time.Duration
	Nodes   int
}

// Tracker follows the failovers from their decision to the nodes' edges.
// Its methods are safe for concurrent use.
type Tracker struct {
	opts Options
	m    *metrics

	mu   sync.Mutex
	open []*entry
	// done are complete reports by site, oldest first.
	done map[string][]api.FailoverReport
	// journal are complete reports the engine has not journaled yet.
	journal []api.FailoverReport
	// nodes are the nodes that reported applying any version, with the
	// time of their last report, and recent their last acknowledgements
	// (an acknowledgement may come before the engine says the version is
	// published).
	nodes  map[string]time.Time
	recent map[string][]publication.Applied
	// restored are the sites whose journaled reports were read back.
	restored map[string]bool
}

const recentPerNode = 16

type entry struct {
	sw        Switch
	committed time.Time
	published time.Time
	version   uint64
	deadline  time.Time
	expect    []string
	rows      map[string]api.FailoverNode
}

// New returns a Tracker.
func New(opts Options) *Tracker {
	if opts.Wait <= 0 {
		opts.Wait = api.FailoverReportWait
	}
	if opts.Keep <= 0 {
		opts.Keep = 32
	}
	if opts.Sites <= 0 {
		opts.Sites = 4096
	}
	if opts.NodeTTL <= 0 {
		opts.NodeTTL = 24 * time.Hour
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 10000
	}
	t := &Tracker{opts: opts, m: newMetrics(), done: map[string][]api.FailoverReport{},
		nodes: map[string]time.Time{}, recent: map[string][]publication.Applied{}, restored: map[string]bool{}}
	if opts.Registerer != nil {
		known := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vigil_failover_nodes_known",
			Help: "Nodes that acknowledged a publication version to this agent (POST /v1/publication/applied); a failover report expects those heard from in the last day."},
			func() float64 {
				t.mu.Lock()
				defer t.mu.Unlock()
				return float64(len(t.nodes))
			})
		opts.Registerer.MustRegister(t.m.detect, t.m.publish, t.m.edge, known)
	}
	return t
}

type metrics struct {
	detect, publish, edge prometheus.Histogram
}

func newMetrics() *metrics {
	return &metrics{
		detect: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vigil_failover_detect_seconds",
			Help:    "Per failover (drills too): from the first round that counted a failure for the origin that made the level unhealthy to the decision to switch.",
			Buckets: []float64{1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600}}),
		publish: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vigil_failover_publish_seconds",
			Help:    "Per failover (drills too): from the decision to switch to the publication of the version carrying it, the commit included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9)}),
		edge: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vigil_failover_edge_seconds",
			Help:    "Per failover and node that reported it: from the publication carrying the switch to the node's edge applying it (by the node's clock).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}),
	}
}

// ms cuts t to the millisecond: the report writes times in milliseconds,
// and its durations are the differences of the times as written.
func ms(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}

// Seconds is b-a in seconds, nil when either is unknown. Both are cut to
// the millisecond first, so the figure is the difference of the times as
// the report writes them.
func Seconds(a, b time.Time) *float64 {
	if a.IsZero() || b.IsZero() {
		return nil
	}
	d := float64(ms(b).Sub(ms(a)).Milliseconds()) / 1000
	return &d
}

// Decided opens the report of a failover.
func (t *Tracker) Decided(sw Switch) {
	sw.RoundStarted, sw.Decided, sw.FirstFailure = ms(sw.RoundStarted), ms(sw.Decided), ms(sw.FirstFailure)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open = append(t.open, &entry{sw: sw, rows: map[string]api.FailoverNode{}})
}

// Committed says that every failover decided so far is saved, at at.
func (t *Tracker) Committed(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.open {
		if e.committed.IsZero() {
			e.committed = ms(at)
		}
	}
}

// Published says that the publication at version, published at at,
// carries every failover committed so far.
func (t *Tracker) Published(version uint64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at = ms(at)
	for _, e := range t.open {
		if e.committed.IsZero() || !e.published.IsZero() {
			continue
		}
		e.published, e.version, e.deadline = at, version, at.Add(t.opts.Wait)
		e.expect = e.expect[:0]
		for n, seen := range t.nodes {
			if at.Sub(seen) < t.opts.NodeTTL {
				e.expect = append(e.expect, n)
			}
		}
		sort.Strings(e.expect)
		if d := Seconds(e.sw.FirstFailure, e.sw.Decided); d != nil {
			t.m.detect.Observe(*d)
		}
		if d := Seconds(e.sw.Decided, at); d != nil {
			t.m.publish.Observe(*d)
		}
		for _, as := range t.recent {
			for _, a := range as {
				t.matchLocked(e, a)
			}
		}
	}
	t.settleLocked(time.Time{})
}

// Applied takes a node's acknowledgement of a version.
func (t *Tracker) Applied(a publication.Applied) {
	if a.Node == "" || a.Version == 0 {
		return
	}
	a.At = ms(a.At)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.nodes[a.Node]; !ok && len(t.nodes) >= t.opts.Nodes {
		oldest, at := "", time.Time{}
		for n, seen := range t.nodes {
			if oldest == "" || seen.Before(at) {
				oldest, at = n, seen
			}
		}
		delete(t.nodes, oldest)
		delete(t.recent, oldest)
	}
	t.nodes[a.Node] = a.At
	r := append(t.recent[a.Node], a)
	if len(r) > recentPerNode {
		r = slices.Delete(r, 0, len(r)-recentPerNode)
	}
	t.recent[a.Node] = r
	for _, e := range t.open {
		if !e.published.IsZero() {
			t.matchLocked(e, a)
		}
	}
	t.settleLocked(time.Time{})
}

// matchLocked fills the node's row of e from a when a is the node's apply
// of the switch: the version itself, or a later one that changed the
// site's level for the node (it had not applied the version before).
func (t *Tracker) matchLocked(e *entry, a publication.Applied) {
	if r, ok := e.rows[a.Node]; ok && r.Reported || a.Version < e.version {
		return
	}
	var site *publication.AppliedSite
	for i := range a.Sites {
		if a.Sites[i].Site == e.sw.Site {
			site = &a.Sites[i]
			break
		}
	}
	if site == nil && a.Version != e.version {
		return
	}
	row := Row(e.sw, e.published, a, site)
	e.rows[a.Node] = row
	if row.Result == "ok" && row.EdgeSeconds != nil {
		t.m.edge.Observe(*row.EdgeSeconds)
	}
}

// Row is a node's row of a failover's report, published at published,
// from its acknowledgement a and what it saw of the site (nil: nothing).
func Row(sw Switch, published time.Time, a publication.Applied, site *publication.AppliedSite) api.FailoverNode {
	row := api.FailoverNode{Node: a.Node, Reported: true, Version: a.Version, Applied: api.NewReportTime(ms(a.At)),
		EdgeSeconds: Seconds(published, a.At), Result: "ok", Proxying: a.Proxying}
	if a.Error != "" {
		row.Result = a.Error
	}
	if site != nil {
		if site.LastRequest != nil {
			row.LastRequest = api.NewReportTime(ms(*site.LastRequest))
			row.LastRequestSeconds = Seconds(sw.FirstFailure, *site.LastRequest)
		}
		row.VisitorRequests, row.VisitorErrors = site.Requests, site.Failures
	}
	return row
}

// Tick completes the reports whose wait for the nodes ended by now.
func (t *Tracker) Tick(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.settleLocked(ms(now))
}

// settleLocked completes every open report whose expected nodes all
// reported, or whose wait ended by now (zero: only the first). A report
// never published (the engine lost its role) ends after twice the wait.
func (t *Tracker) settleLocked(now time.Time) {
	keep := t.open[:0]
	for _, e := range t.open {
		switch {
		case !e.published.IsZero() && (e.allReported() || !now.IsZero() && !now.Before(e.deadline)):
		case e.published.IsZero() && !now.IsZero() && now.Sub(e.sw.Decided) >= 2*t.opts.Wait:
		default:
			keep = append(keep, e)
			continue
		}
		rep := e.report(true)
		t.journal = append(t.journal, rep)
		t.keepLocked(rep)
	}
	clear(t.open[len(keep):])
	t.open = keep
}

func (e *entry) allReported() bool {
	for _, n := range e.expect {
		if !e.rows[n].Reported {
			return false
		}
	}
	return true
}

// report is e's report as it stands.
func (e *entry) report(complete bool) api.FailoverReport {
	var rows []api.FailoverNode
	for _, r := range e.rows {
		rows = append(rows, r)
	}
	for _, n := range e.expect {
		if _, ok := e.rows[n]; !ok {
			rows = append(rows, api.FailoverNode{Node: n})
		}
	}
	return Build(e.sw, e.committed, e.published, e.version, rows, complete)
}

// Build is the report of sw, committed and published at those times
// (zero: not yet) under version, with the nodes' rows: it sorts the rows
// and works out every duration.
func Build(sw Switch, committed, published time.Time, version uint64, rows []api.FailoverNode, complete bool) api.FailoverReport {
	rep := api.FailoverReport{
		Site: sw.Site, FromLevel: sw.FromLevel, ToLevel: sw.ToLevel, Drill: sw.Drill, Seq: sw.Seq, Round: sw.Round,
		Complete: complete, Origin: sw.Origin,
		FirstFailure: api.NewReportTime(ms(sw.FirstFailure)), RoundStarted: api.ReportTime{Time: ms(sw.RoundStarted)},
		Decided: api.ReportTime{Time: ms(sw.Decided)}, Committed: api.NewReportTime(ms(committed)), Published: api.NewReportTime(ms(published)),
		Publication:   version,
		DetectSeconds: Seconds(sw.FirstFailure, sw.Decided), CommitSeconds: Seconds(sw.Decided, committed),
		PublishSeconds: Seconds(sw.Decided, published),
		Nodes:          slices.Clone(rows),
	}
	if rep.Nodes == nil {
		rep.Nodes = []api.FailoverNode{}
	}
	sort.Slice(rep.Nodes, func(i, j int) bool { return rep.Nodes[i].Node < rep.Nodes[j].Node })
	var last time.Time
	for _, r := range rep.Nodes {
		if r.Reported && r.Result == "ok" && r.Applied != nil && r.Applied.After(last) {
			last = r.Applied.Time
		}
	}
	if !last.IsZero() {
		rep.EdgeSeconds = Seconds(published, last)
		rep.TotalSeconds = Seconds(sw.FirstFailure, last)
	}
	return rep
}

// keepLocked adds a complete report to the site's, dropping the oldest
// beyond Keep, and the site whose newest report is the oldest beyond
// Sites.
func (t *Tracker) keepLocked(rep api.FailoverReport) {
	list := t.done[rep.Site]
	if i := slices.IndexFunc(list, func(r api.FailoverReport) bool { return r.Seq == rep.Seq }); i >= 0 {
		list[i] = rep
		return
	}
	list = append(list, rep)
	sort.SliceStable(list, func(i, j int) bool { return list[i].Seq < list[j].Seq })
	if len(list) > t.opts.Keep {
		list = slices.Delete(list, 0, len(list)-t.opts.Keep)
	}
	t.done[rep.Site] = list
	if len(t.done) > t.opts.Sites {
		oldest, at := "", uint64(0)
		for s, l := range t.done {
			if s == rep.Site {
				continue
			}
			if n := l[len(l)-1].Seq; oldest == "" || n < at {
				oldest, at = s, n
			}
		}
		delete(t.done, oldest)
		delete(t.restored, oldest)
	}
}

// Take returns the reports completed since the last call, for the
// engine to journal.
func (t *Tracker) Take() []api.FailoverReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.journal
	t.journal = nil
	return out
}

// Restored reports whether the site's journaled reports were read back
// (Restore) since it was last forgotten.
func (t *Tracker) Restored(site string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.restored[site]
}

// Restore adds reports read back from the journal to the site's.
func (t *Tracker) Restore(site string, reps []api.FailoverReport) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range reps {
		r.Complete = true
		t.keepLocked(r)
	}
	t.restored[site] = true
}

// Reports returns the site's reports, newest first, at most limit (0:
// all kept): those still waiting for their nodes, then the complete ones.
func (t *Tracker) Reports(site string, limit int) []api.FailoverReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []api.FailoverReport{}
	for i := len(t.open) - 1; i >= 0; i-- {
		if e := t.open[i]; e.sw.Site == site {
			out = append(out, e.report(false))
		}
	}
	list := t.done[site]
	for i := len(list) - 1; i >= 0; i-- {
		out = append(out, list[i])
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}
