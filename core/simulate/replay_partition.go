package simulate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/partition"
)

// PartitionEvent is one start (Suspected) or end of a suspected path
// partition (docs/partition.md), recorded in the journal or replayed:
// Time is the start of its round, Rounds the rounds in a row the group
// was alone.
type PartitionEvent struct {
	Time      time.Time
	Origin    string
	Group     string
	Rounds    int
	Suspected bool
}

func (e PartitionEvent) text() string {
	if e.Suspected {
		return fmt.Sprintf("%s %s %s suspected", e.Time.Format("15:04:05"), e.Origin, e.Group)
	}
	return fmt.Sprintf("%s %s %s ended, %d rounds", e.Time.Format("15:04:05"), e.Origin, e.Group, e.Rounds)
}

// replayPartition runs the path-partition rule (core/partition) over the
// recorded rounds, as the agent ran it over its rounds: for each origin a
// replayed round judged, the groups the recording kept as down (every
// vote of the group down) and the up votes of the sources the replayed
// chain asked, rebuilt into the rule's tally (partition.Tally.AddUps).
// Only the groups of the sources the replay asked count, so a chain that
// settles sooner (and asks fewer sources) judges on fewer groups, as the
// agent would have.
type replayPartition struct {
	rounds     int
	byPosition bool
	mem        partition.Memory
	tally      partition.Tally
	// points are the recorded rounds with partition data, by time and
	// site/origin.
	points map[int64]map[string]*ExportPoint
	events map[string][]PartitionEvent // by site
	// noData counts the recorded origin rounds without partition data
	// (the recording's rule was off), cut those with groups left out.
	noData, cut int
}

// newReplayPartition returns the rule for the replay of x under cfg, or
// nil when partitions are not replayed, adding to warnings why not (and
// what the replay cannot honour).
func newReplayPartition(x *Export, cfg *config.Config, f *fleet.Fleet, recorded bool, warnings *[]string) *replayPartition {
	pc := cfg.Control.Partition
	if pc == nil {
		if recorded {
			*warnings = append(*warnings, "this configuration has no control { partition }: path partitions are not replayed (the recorded ones are shown)")
		}
		return nil
	}
	if !x.Header.Partition {
		why := fmt.Sprintf("an export of version %d", x.Header.Version)
		if x.Header.Version == ExportVersion {
			why = "its history file is of a version before 3"
		}
		*warnings = append(*warnings, "no partition data: the recording ("+why+") keeps no voter groups, so path_partition_suspected is not replayed")
		return nil
	}
	label, from := x.Header.PartitionLabel, "its header"
	if label == "" {
		label, from = labelOfGroups(x), "its groups"
	}
	switch {
	case label != "" && label != pc.Label:
		*warnings = append(*warnings, fmt.Sprintf("the recording grouped the voters by the label %q (%s) and this configuration groups them by %q: the recorded groups cannot be regrouped, so path partitions are not replayed", label, from, pc.Label))
		return nil
	case label == "":
		*warnings = append(*warnings, fmt.Sprintf("the export does not name the voter label its partition rule grouped by (made with -data-dir): its groups are taken as grouped by %q", pc.Label))
	}
	p := &replayPartition{rounds: pc.Rounds, byPosition: len(x.Header.Sources) == 0,
		points: map[int64]map[string]*ExportPoint{}, events: map[string][]PartitionEvent{}}
	for _, o := range x.Origins {
		if f.Site(o.Site) == nil {
			continue
		}
		key := o.Site + "/" + o.Origin
		for i := range o.Points {
			pt := &o.Points[i]
			if p.points[pt.At()] == nil {
				p.points[pt.At()] = map[string]*ExportPoint{}
			}
			p.points[pt.At()][key] = pt
		}
	}
	return p
}

// labelOfGroups is the label of the first recorded group named with one
// ("node/pop=eu": pop), "" when every group is a source alone.
func labelOfGroups(x *Export) string {
	for _, o := range x.Origins {
		for _, pt := range o.Points {
			for _, g := range pt.DownGroups {
				if _, rest, ok := strings.Cut(g, "/"); ok {
					if label, _, ok := strings.Cut(rest, "="); ok {
						return label
					}
				}
			}
		}
	}
	return ""
}

// groupSource is the source of a group's name: "node" of "node/pop=eu",
// "direct" of "direct".
func groupSource(g string) string {
	src, _, _ := strings.Cut(g, "/")
	return src
}

// observe applies the rule to the sites of reports after the replayed
// round of recorded time t (ok false: a round filled in a gap, which
// judges nothing and so neither counts nor ends a streak). An origin
// without a recorded round at t, or one recorded without partition data,
// is left out the same way.
func (p *replayPartition) observe(f *fleet.Fleet, reports []fleet.Report, t int64, ok bool, at time.Time) {
	if p == nil || !ok {
		return
	}
	round := p.points[t]
	var out []decide.Event
	for _, rep := range reports {
		s := rep.Site
		out = out[:0]
		for oi, o := range s.Spec.Origins {
			if s.Outcomes[oi].Skip {
				continue
			}
			pt := round[s.Spec.Name+"/"+o.Name]
			if pt == nil {
				continue
			}
			if !pt.Partition {
				p.noData++
				continue
			}
			if pt.GroupsCut {
				p.cut++
			}
			p.tally.Reset()
			for i := 0; i < int(s.Outcomes[oi].Asked) && i < len(s.SourceList); i++ {
				name := f.Chain[s.SourceList[i]].Name
				src := name
				if p.byPosition {
					src = strconv.Itoa(s.SourceList[i])
				}
				for _, tl := range pt.Votes {
					if tl.Src == src {
						p.tally.AddUps(tl.Up)
					}
				}
				for _, g := range pt.DownGroups {
					if groupSource(g) == name {
						p.tally.Add(g, false)
					}
				}
			}
			out, _ = p.mem.Observe(partition.Origin{Site: s.Spec.Name, Origin: o.Name}, &p.tally, p.rounds, at.Unix(), out, nil)
		}
		for _, ev := range out {
			p.events[s.Spec.Name] = append(p.events[s.Spec.Name], PartitionEvent{Time: at, Origin: ev.Origin, Group: ev.Group, Rounds: ev.Rounds, Suspected: ev.Suspected})
		}
	}
}

// warnings says what the replay of partitions could not honour.
func (p *replayPartition) warnings() []string {
	if p == nil {
		return nil
	}
	var out []string
	if p.noData > 0 {
		out = append(out, fmt.Sprintf("%d recorded rounds of an origin carry no partition data (the recording's rule was off then): they neither count nor end a suspicion", p.noData))
	}
	if p.cut > 0 {
		out = append(out, fmt.Sprintf("%d recorded rounds of an origin had more groups down than the history keeps: the groups left out are not replayed", p.cut))
	}
	return out
}

// partitionSummary compares the recorded and replayed partition events
// over every site: "" when neither has any and the rule was not replayed.
func (r *ReplayResult) partitionSummary() string {
	rec, rep := 0, 0
	same := true
	var shift []time.Duration
	for _, s := range r.Sites {
		rec += len(s.RecordedPartitions)
		rep += len(s.ReplayedPartitions)
		if len(s.RecordedPartitions) != len(s.ReplayedPartitions) {
			same = false
		} else {
			for i := range s.RecordedPartitions {
				if s.RecordedPartitions[i] != s.ReplayedPartitions[i] {
					same = false
				}
			}
		}
		a, b := firstSuspicion(s.RecordedPartitions), firstSuspicion(s.ReplayedPartitions)
		if a != nil && b != nil {
			shift = append(shift, b.Time.Sub(a.Time))
		}
	}
	switch {
	case !r.Partitions && rec == 0:
		return ""
	case !r.Partitions:
		return fmt.Sprintf("%d recorded, not replayed", rec)
	case same:
		return fmt.Sprintf("as recorded (%d event%s)", rec, plurals(rec))
	}
	var out string
	switch d := rep - rec; {
	case d == 0:
		out = fmt.Sprintf("the same number of events (%d)", rep)
	case d < 0:
		out = fmt.Sprintf("%d fewer event%s (%d instead of %d)", -d, plurals(-d), rep, rec)
	default:
		out = fmt.Sprintf("%d more event%s (%d instead of %d)", d, plurals(d), rep, rec)
	}
	if len(shift) > 0 {
		var sum time.Duration
		for _, d := range shift {
			sum += d
		}
		switch avg := sum / time.Duration(len(shift)); {
		case avg > 0:
			out += fmt.Sprintf(", first suspicion %s later", fmtDur(avg))
		case avg < 0:
			out += fmt.Sprintf(", first suspicion %s sooner", fmtDur(-avg))
		default:
			out += ", first suspicion at the same time"
		}
	}
	if rep == rec && !strings.HasSuffix(out, "later") && !strings.HasSuffix(out, "sooner") {
		out += ", not all at the recorded rounds" // else "as recorded"
	}
	return out
}

func firstSuspicion(evs []PartitionEvent) *PartitionEvent {
	for i := range evs {
		if evs[i].Suspected {
			return &evs[i]
		}
	}
	return nil
}

func plurals(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
