package engine

import (
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/history"
	"github.com/vigilcdn/vigil/core/vote"
	"github.com/vigilcdn/vigil/sdk"
)

// HistoryFile is the history's file name in data_dir.
const HistoryFile = "history.ring"

// HistoryOptions configure OpenHistory.
type HistoryOptions struct {
	// Rounds is how many rounds the file keeps (history.DefaultRounds
	// when 0).
	Rounds     int
	Logger     hclog.Logger
	Registerer prometheus.Registerer
	// Now is the clock of the uptime windows (time.Now when nil).
	Now func() time.Time
}

// HistoryFeed records every round's verdicts in the history file and
// answers GET /v1/sites/{site}/history. It is an engine Observer: after
// each commit that saved a round, it copies the round's outcomes from the
// views into a small batch and hands it to its own goroutine, which writes
// the file. A round never waits for the file:
// a batch that finds the writer still busy with the one before is dropped
// and counted, and a failed write is logged and counted. Its methods are
// safe for concurrent use; a nil or file-less feed keeps nothing and says
// so.
type HistoryFeed struct {
	eng  *Engine
	ring *history.Ring // nil: no history (note says why)
	note string
	log  hclog.Logger
	now  func() time.Time

	qmu    sync.Mutex
	closed bool
	queue  chan *histBatch
	remap  chan *fleet.Fleet // a reload's new fleet, to map at once (follow)
	spare  chan *histBatch
	done   chan struct{}

	mu       sync.Mutex // the slots of mapFleet's origins
	mapFleet *fleet.Fleet
	offsets  []int32 // by site index of mapFleet: its first origin in slots
	slots    []int32

	obs []history.Obs // the writer's buffer

	written, failed, dropped, reset prometheus.Counter
	unkept                          prometheus.Gauge
	lastErr                         time.Time
}

type histBatch struct {
	flushed chan struct{} // a Flush marker: closed once reached
	fleet   *fleet.Fleet
	at      time.Time
	obs     []histObs
}

type histObs struct {
	site    int32
	origin  uint16
	verdict history.Verdict
	by      int8
	state   history.State
	latency time.Duration
	votes   [history.VoteSlots]history.Tally
	nvotes  uint8
	// part is set when the partition rule ran: down are then its first
	// groups whose every vote was down (ndown of them in all).
	part  bool
	down  [history.GroupSlots]string
	ndown uint8
}

// errLogEvery bounds how often a failing history write is logged.
const errLogEvery = 10 * time.Minute

// NoHistory is a feed that keeps nothing, for an agent without data_dir
// history (an etcd store): the API answers kept false with note.
func NoHistory(note string) *HistoryFeed { return &HistoryFeed{note: note} }

// OpenHistory opens (or makes) dir/history.ring for e's fleet and starts
// its writer. It never fails: a file that cannot be made gives a feed that
// keeps nothing, logged, and a damaged one is made again empty, logged.
func OpenHistory(dir string, e *Engine, o HistoryOptions) *HistoryFeed {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	origins := 0
	if v := e.Views(); v != nil {
		for _, s := range v.fleet.Sites {
			origins += len(s.Spec.Origins)
		}
	}
	path := filepath.Join(dir, HistoryFile)
	h := &HistoryFeed{eng: e, log: o.Logger, now: o.Now,
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_history_rounds_written_total", Help: "Rounds written to the history file."}),
		failed:  prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_history_write_errors_total", Help: "Rounds (or slot updates) the history file could not take; the rounds themselves went on."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_history_rounds_dropped_total", Help: "Rounds left out of the history because its writer was still busy with the one before."}),
		reset:   prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_history_records_reset_total", Help: "Origin records of the history file found damaged and started again empty."}),
		unkept:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_history_origins_unkept", Help: "Origins the history file has no room for (it grows at the next start)."}),
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{h.written, h.failed, h.dropped, h.reset, h.unkept} {
			if err := o.Registerer.Register(c); err != nil {
				h.log.Warn("history metric not registered", "error", err)
			}
		}
	}
	ring, rep, err := history.Open(path, history.Options{Rounds: o.Rounds, Origins: origins})
	if err != nil {
		h.note = "the history file could not be made: " + err.Error()
		h.log.Error("no verdict history: the file cannot be made; rounds go on without it", "path", path, "error", err)
		return h
	}
	switch {
	case rep.Restarted != "":
		h.log.Warn("the history file was unusable and starts again empty; rounds go on", "path", path, "problem", rep.Restarted)
	case rep.Created:
		h.log.Info("history file made", "path", path, "origins", rep.Capacity, "bytes", rep.Size)
	case rep.Grown:
		h.log.Info("history file grown for the fleet", "path", path, "origins", rep.Capacity, "bytes", rep.Size)
	}
	if rep.Resized > 0 {
		h.log.Info("history file resized for another number of rounds; its records are kept", "path", path, "rounds_before", rep.Resized, "rounds", o.Rounds, "bytes", rep.Size)
	}
	h.ring = ring
	h.queue, h.spare, h.done = make(chan *histBatch, 1), make(chan *histBatch, 2), make(chan struct{})
	h.remap = make(chan *fleet.Fleet, 1)
	go h.write()
	return h
}

// Committed is the feed as an engine Observer: after a commit that saved
// a round, it hands the round's verdicts to the writer.
func (h *HistoryFeed) Committed(c Commit) {
	if h == nil || h.ring == nil {
		return
	}
	if c.Round == 0 || c.Probed == 0 {
		h.follow(c.Views)
		return
	}
	h.record(c.Views, c.Round)
}

// follow has the writer map the fleet of v when it is a new one (a
// reload's): the fleet it maps now is then dropped at once, not kept, with
// the configuration it was built from, until the next round.
func (h *HistoryFeed) follow(v *Views) {
	if v == nil {
		return
	}
	h.mu.Lock()
	same := h.mapFleet == nil || h.mapFleet == v.fleet
	h.mu.Unlock()
	if same {
		return
	}
	h.qmu.Lock()
	defer h.qmu.Unlock()
	if h.closed {
		return
	}
	// Apart from the rounds' queue, which a remap must not fill (the
	// next round's batch would be dropped); the latest fleet wins.
	select {
	case <-h.remap:
	default:
	}
	h.remap <- v.fleet
}

// AfterRound hands the verdicts of round res to the writer, as Committed
// does; for a caller that runs rounds itself (RunRound) without
// registering the feed as an observer.
func (h *HistoryFeed) AfterRound(res RoundResult) {
	if h == nil || h.ring == nil || res.Discarded || !res.Saved || res.Probed == 0 {
		return
	}
	h.record(h.eng.Views(), res.Round)
}

// record copies the outcomes of round from the views v (the round's
// record of each site it probed) into a batch for the writer. It takes no
// engine lock.
func (h *HistoryFeed) record(v *Views, round uint64) {
	if v == nil {
		return
	}
	var b *histBatch
	select {
	case b = <-h.spare:
		b.obs = b.obs[:0]
	default:
		b = &histBatch{}
	}
	b.fleet = v.fleet
	at := time.Time{}
	for i, last := range v.last {
		rec := last.rec
		if rec == nil || rec.seq != round {
			continue
		}
		at = timeOf(rec.at)
		rs := &rec.sites[last.site]
		parts := rec.partitions[last.site] // partition.go
		snap := v.sites[i]
		s := v.fleet.Sites[i]
		for oi := range s.Spec.Origins {
			t := &rec.targets[rs.firstTarget+uint32(oi)]
			if t.out.Skip {
				continue
			}
			votes := rec.votes[t.votesFrom:t.votesTo]
			o := histObs{
				site: int32(i), origin: uint16(oi),
				verdict: histVerdict(t.out.Verdict), by: t.out.By, state: history.State(snap.origins[oi].state),
				latency: meanLatency(t.out, votes),
			}
			o.nvotes = tallies(&o.votes, s.SourceList, int(t.out.Asked), votes)
			o.part = rec.partitions != nil
			for _, ps := range parts {
				if ps.down && ps.origin == oi && o.ndown < 0xff {
					if int(o.ndown) < len(o.down) {
						o.down[o.ndown] = ps.group
					}
					o.ndown++
				}
			}
			b.obs = append(b.obs, o)
		}
	}
	if len(b.obs) == 0 {
		return
	}
	b.at = at
	h.qmu.Lock()
	defer h.qmu.Unlock()
	if h.closed {
		return
	}
	select {
	case h.queue <- b:
	default:
		h.dropped.Inc()
	}
}

// tallies counts votes by source into out: one tally for each of the
// first asked sources of the site's chain (list), in chain order, a source
// asked that returned nothing included (all zero), at most
// history.VoteSlots. It returns how many it filled.
func tallies(out *[history.VoteSlots]history.Tally, list []int, asked int, votes []voteRecord) uint8 {
	n := min(asked, len(list), len(out))
	for k := range n {
		out[k] = history.Tally{Source: int8(list[k])}
	}
	inc := func(c *uint8) {
		if *c < 0xff {
			*c++
		}
	}
	for _, v := range votes {
		for k := range n {
			if int(v.source) != list[k] {
				continue
			}
			switch sdk.Value(v.value) {
			case sdk.Up:
				inc(&out[k].Up)
			case sdk.Down:
				inc(&out[k].Down)
			case sdk.Abstain:
				inc(&out[k].Abstain)
			}
			break
		}
	}
	return uint8(n)
}

func histVerdict(v vote.Verdict) history.Verdict {
	switch v {
	case vote.VerdictUp:
		return history.Up
	case vote.VerdictDown:
		return history.Down
	}
	return history.Unsettled
}

// meanLatency is the mean latency of the votes that made the verdict: the
// settling source's agreeing votes, or every up and down vote when none
// settled.
func meanLatency(out vote.Outcome, votes []voteRecord) time.Duration {
	want := uint8(sdk.Down)
	if out.Verdict == vote.VerdictUp {
		want = uint8(sdk.Up)
	}
	var sum, n int64
	for _, v := range votes {
		if out.By >= 0 && (int8(v.source) != out.By || v.value != want) {
			continue
		}
		if v.value == uint8(sdk.Abstain) {
			continue
		}
		sum += int64(v.latency)
		n++
	}
	if n == 0 {
		return 0
	}
	return time.Duration(sum/n) * time.Microsecond
}

// write is the writer goroutine.
func (h *HistoryFeed) write() {
	defer close(h.done)
	for {
		var b *histBatch
		select {
		case f := <-h.remap:
			if v := h.eng.Views(); v != nil && v.fleet == f { // not an older fleet than a round mapped since
				h.mapTo(f)
			}
			continue
		case next, ok := <-h.queue:
			if !ok {
				return
			}
			b = next
		}
		if b.flushed != nil {
			close(b.flushed)
			continue
		}
		h.writeBatch(b)
		b.fleet = nil // a spare batch keeps no fleet alive
		select {
		case h.spare <- b:
		default:
		}
	}
}

func (h *HistoryFeed) writeBatch(b *histBatch) {
	if !h.mapTo(b.fleet) {
		return
	}
	h.mu.Lock()
	obs := h.obs[:0]
	for _, o := range b.obs {
		obs = append(obs, history.Obs{Slot: h.slots[h.offsets[o.site]+int32(o.origin)], Verdict: o.verdict, By: o.by, State: o.state, Latency: o.latency,
			Votes: o.votes, NVotes: o.nvotes, Partition: o.part, DownGroups: o.down, NDown: o.ndown})
	}
	h.mu.Unlock()
	if cap(obs) > 1<<16 && len(obs) < cap(obs)/4 {
		obs = nil // a burst's buffer is not worth keeping
	}
	h.obs = obs
	n, err := h.ring.Record(b.at, obs)
	if n > 0 {
		h.reset.Add(float64(n))
		h.log.Warn("damaged history records found and started again empty", "records", n)
	}
	if err != nil {
		h.writeFailed(err)
		return
	}
	h.written.Inc()
}

func (h *HistoryFeed) writeFailed(err error) {
	h.failed.Inc()
	if now := time.Now(); now.Sub(h.lastErr) >= errLogEvery {
		h.lastErr = now
		h.log.Error("cannot write the verdict history; rounds go on without it (logged again in 10 minutes at most, counted in vigil_history_write_errors_total)",
			"path", h.ring.Path(), "error", err)
	}
}

// mapTo gives every origin of f its slot in the file, once per fleet (at
// the start and after a reload). It reports whether the slots are known.
func (h *HistoryFeed) mapTo(f *fleet.Fleet) bool {
	h.mu.Lock()
	same := h.mapFleet == f
	h.mu.Unlock()
	if same {
		return true
	}
	offsets := make([]int32, len(f.Sites))
	var keys []uint64
	for i, s := range f.Sites {
		offsets[i] = int32(len(keys))
		for _, o := range s.Spec.Origins {
			keys = append(keys, history.Key(s.Spec.Name, o.Name))
		}
	}
	slots, err := h.ring.Sync(keys)
	if err != nil {
		h.writeFailed(err)
		return false
	}
	unkept := 0
	for _, s := range slots {
		if s < 0 {
			unkept++
		}
	}
	h.unkept.Set(float64(unkept))
	if unkept > 0 {
		h.log.Warn("the history file has no room for some origins; they get no history until the agent restarts, which grows the file", "origins", unkept)
	}
	h.mu.Lock()
	h.mapFleet, h.offsets, h.slots = f, offsets, slots
	h.mu.Unlock()
	return true
}

// SiteHistory is the history of the named site, or nil when there is no
// such site.
func (h *HistoryFeed) SiteHistory(name string) (*api.SiteHistory, error) {
	var v *Views
	if h != nil && h.eng != nil {
		v = h.eng.Views()
	}
	out := &api.SiteHistory{Site: name, Origins: map[string]api.OriginHistory{}}
	if h == nil || h.ring == nil {
		if v != nil && !v.Has(name) {
			return nil, nil
		}
		out.Note = "this agent keeps no verdict history"
		if h != nil && h.note != "" {
			out.Note = h.note
		}
		return out, nil
	}
	i := v.Index(name)
	if i < 0 {
		return nil, nil
	}
	out.Kept, out.Rounds = true, min(h.ring.Rounds(), history.RecentRounds)
	now := h.now()
	for _, o := range v.fleet.Sites[i].Spec.Origins {
		oh := api.OriginHistory{Recent: []api.HistoryPoint{}}
		slot := h.slotOf(name, o.Name)
		got, ok, damaged, err := h.ring.ReadLast(slot, history.Key(name, o.Name), now, out.Rounds)
		if err != nil {
			return nil, err
		}
		oh.Damaged = damaged
		if ok {
			for _, p := range got.Points {
				oh.Recent = append(oh.Recent, api.HistoryPoint{Time: p.Time, Verdict: p.Verdict.String(), State: p.State.String(),
					LatencyMS: float64(p.Latency/(100*time.Microsecond)) / 10})
			}
			w := got.Windows
			oh.Uptime1h, oh.Judged1h = uptime(w[history.Window1h])
			oh.Uptime24h, oh.Judged24h = uptime(w[history.Window24h])
			oh.Uptime7d, oh.Judged7d = uptime(w[history.Window7d])
			if !got.Since.IsZero() {
				since := got.Since
				oh.DataSince = &since
			}
			if got.Kept > 0 {
				from := got.KeptSince
				oh.KeptSince, oh.KeptRounds, oh.Cut = &from, got.Kept, got.Cut
			}
		}
		out.Origins[o.Name] = oh
	}
	return out, nil
}

func uptime(w history.Window) (*float64, int) {
	p, ok := w.Uptime()
	if !ok {
		return nil, 0
	}
	return &p, w.Up + w.Down
}

// slotOf is the slot of an origin in the file, -1 when it has none yet.
func (h *HistoryFeed) slotOf(site, origin string) int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mapFleet == nil {
		return -1
	}
	i := h.mapFleet.SiteIndex(site)
	if i < 0 {
		return -1
	}
	oi := h.mapFleet.Sites[i].Spec.OriginIndex(origin)
	if oi < 0 {
		return -1
	}
	return h.slots[h.offsets[i]+int32(oi)]
}

// Flush waits until the writer has written every batch handed to it so
// far (for tests and benchmarks).
func (h *HistoryFeed) Flush() {
	if h == nil || h.ring == nil {
		return
	}
	m := &histBatch{flushed: make(chan struct{})}
	h.qmu.Lock()
	if h.closed {
		h.qmu.Unlock()
		return
	}
	h.queue <- m
	h.qmu.Unlock()
	<-m.flushed
}

// Close stops the writer once it has written what it was handed, and
// closes the file. Call it after the rounds have stopped.
func (h *HistoryFeed) Close() error {
	if h == nil || h.ring == nil {
		return nil
	}
	h.qmu.Lock()
	if h.closed {
		h.qmu.Unlock()
		return nil
	}
	h.closed = true
	close(h.queue)
	h.qmu.Unlock()
	<-h.done
	return h.ring.Close()
}
