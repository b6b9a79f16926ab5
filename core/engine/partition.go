package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/partition"
	"github.com/vigilcdn/vigil/core/readmodel"
	"github.com/vigilcdn/vigil/sdk"
)

// Path-partition detection (docs/partition.md). The rule itself is the
// pure core/partition, which `vigil simulate` runs too; this file feeds it
// each probed origin's votes with the voters' labels, which it copies in
// the background from the sources' status. After each round, the
// votes of each origin are grouped by source and by the value of the
// configured voter label; a group whose every vote is down while a vote
// outside it is up is "alone". Alone for Rounds probed rounds in a row is
// a suspected path partition: an event at its start and at its end, and
// the origin view's partitions while it lasts. Nothing here changes a
// verdict, a state or a level.
//
// Memory: with control { partition } absent the engine keeps a nil
// pointer. With it, one entry per origin and group currently alone (a few
// words), dropped as soon as the group is not alone any more, and the
// voter labels copied from the sources' status.

// labelRefresh is the least time between two reads of the sources' status
// for the voters' labels; labelRefreshSoon when a round saw a voter that a
// reporting source did not list (a node that attached since).
const (
	labelRefresh     = 5 * time.Second
	labelRefreshSoon = time.Second
)

// voterLabels is the copy of the voters' labels: by source \x00 voter the
// label's value ("" for a listed voter without the label), and the sources
// that report their voters.
type voterLabels struct {
	values    map[string]string
	reporting map[string]bool
}

// partitionDetector is the engine's side of the rule (core/partition):
// the rule's memory, guarded by the engine's mu, and the voters' labels,
// swapped atomically by the background refresh.
type partitionDetector struct {
	label  string
	rounds int

	labels     atomic.Pointer[voterLabels]
	refreshing atomic.Bool
	lastAsked  atomic.Int64 // Unix nanoseconds of the last refresh start

	mem   partition.Memory
	tally partition.Tally
	susp  []partition.Streak // the buffer of one origin's suspicions
	down  []string           // the buffer of one origin's down groups
	fleet *fleet.Fleet       // the fleet the memory was last checked against
}

// partSuspect is a suspicion as a round record keeps it for the views,
// or, with down set, a group whose every vote was down in a round with an
// up vote, for the history (history.go: what a replay needs to run the
// rule again).
type partSuspect struct {
	origin int
	group  string
	rounds int
	since  int64
	down   bool
}

// partitionSetup makes, keeps or drops the detector for the configuration
// in force. Called with e.mu held.
func (e *Engine) partitionSetup() *partitionDetector {
	pc := e.cfg.Control.Partition
	if pc == nil {
		e.part = nil
		return nil
	}
	if e.part == nil || e.part.label != pc.Label {
		e.part = &partitionDetector{label: pc.Label}
	}
	e.part.rounds = pc.Rounds
	return e.part
}

// refreshLabels starts a background read of the sources' status when the
// last one is older than labelRefresh and none runs: the round never waits
// for it.
func (e *Engine) refreshLabels(p *partitionDetector, now time.Time, soon bool) {
	every := labelRefresh
	if soon {
		every = labelRefreshSoon
	}
	if now.UnixNano()-p.lastAsked.Load() < int64(every) || !p.refreshing.CompareAndSwap(false, true) {
		return
	}
	p.lastAsked.Store(now.UnixNano())
	go func() {
		defer p.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), labelRefresh)
		defer cancel()
		vl := &voterLabels{values: map[string]string{}, reporting: map[string]bool{}}
		for _, r := range e.SourceReports(ctx) {
			vl.reporting[r.Source] = true
			if r.Err != nil {
				continue
			}
			for _, it := range r.Status.Items {
				vl.values[r.Source+"\x00"+it.Name] = it.Labels[p.label]
			}
		}
		p.labels.Store(vl)
	}()
}

// partitionEvents applies the rule (core/partition) to the site of rs
// after its round, appending any start or end of a suspicion to events
// (a copy of the round's events is made first). It records the site's
// current suspicions in rec for the views. Called with e.mu held.
func (e *Engine) partitionEvents(f *fleet.Fleet, rec *roundRecord, rs *roundSite, s *fleet.Site, events []decide.Event, at int64) []decide.Event {
	p := e.partitionSetup()
	if p == nil {
		return events
	}
	if p.fleet != f {
		p.mem.Prune(func(k partition.Origin) bool {
			s := f.Site(k.Site)
			return s != nil && s.Spec.OriginIndex(k.Origin) >= 0
		})
		p.fleet = f
	}
	vl := p.labels.Load()
	if vl == nil {
		vl = &voterLabels{}
	}
	unknown := vl.values == nil
	if rec.partitions == nil {
		// Not nil: the history knows the rule ran in this round.
		rec.partitions = map[int32][]partSuspect{}
	}
	n := int32(len(rec.sites))
	var out []decide.Event
	site := s.Spec.Name
	for oi := range s.Spec.Origins {
		t := &rec.targets[rs.firstTarget+uint32(oi)]
		if t.out.Skip {
			continue
		}
		p.tally.Reset()
		for _, v := range rec.votes[t.votesFrom:t.votesTo] {
			if v.value != uint8(sdk.Up) && v.value != uint8(sdk.Down) {
				continue
			}
			src := f.Chain[v.source].Name
			val, ok := vl.values[src+"\x00"+v.voter]
			if !ok && vl.reporting[src] {
				unknown = true
			}
			p.tally.Add(partition.GroupName(src, p.label, val), v.value == uint8(sdk.Up))
		}
		out, p.susp = p.mem.Observe(partition.Origin{Site: site, Origin: s.Spec.Origins[oi].Name}, &p.tally, p.rounds, at, out, p.susp[:0])
		for _, st := range p.susp {
			rec.partitions[n] = append(rec.partitions[n], partSuspect{origin: oi, group: st.Group, rounds: st.Rounds, since: st.Since})
		}
		p.down = p.tally.DownGroups(p.down[:0])
		for _, g := range p.down {
			rec.partitions[n] = append(rec.partitions[n], partSuspect{origin: oi, group: g, down: true})
		}
	}
	e.refreshLabels(p, e.opts.Now(), unknown)
	if len(out) == 0 {
		return events
	}
	return append(append(make([]decide.Event, 0, len(events)+len(out)), events...), out...)
}

// partitionFill adds the origin's suspicions at the site's last round to
// the read model's origin.
func partitionFill(o *readmodel.Origin, last lastRef, origin int) {
	if last.rec == nil || last.rec.partitions == nil {
		return
	}
	for _, ps := range last.rec.partitions[last.site] {
		if ps.origin == origin && !ps.down {
			o.Partitions = append(o.Partitions, readmodel.Partition{Group: ps.group, Rounds: ps.rounds, Since: timeOf(ps.since)})
		}
	}
}
