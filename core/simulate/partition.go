package simulate

import (
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/partition"
	"github.com/vigilcdn/vigil/core/vote"
)

// partitionRule runs the path-partition rule (core/partition) over the
// timeline's votes, as the agent runs it over its sources' votes: per
// origin the round judged, the votes of the sources the chain asked, each
// in the group of its source and its "@label=value".
type partitionRule struct {
	label  string
	rounds int
	mem    partition.Memory
	tally  partition.Tally
}

// events returns the site's events of the round (or confirmation tick)
// st followed by any start or end of a suspicion; events is not changed.
// A nil rule returns events.
func (p *partitionRule) events(f *fleet.Fleet, s *fleet.Site, st Step, at int64, events []decide.Event) []decide.Event {
	if p == nil {
		return events
	}
	var out []decide.Event
	for oi, o := range s.Spec.Origins {
		if s.Outcomes[oi].Skip {
			continue
		}
		key := s.Spec.Name + "/" + o.Name
		p.tally.Reset()
		for _, src := range s.Asked(f.Chain, oi) {
			labels := st.Labels[key][src]
			for i, v := range st.Round[key][src] {
				value := ""
				if labels != nil {
					value = labels[i]
				}
				p.tally.Add(partition.GroupName(src, p.label, value), v == vote.VerdictUp)
			}
		}
		out, _ = p.mem.Observe(partition.Origin{Site: s.Spec.Name, Origin: o.Name}, &p.tally, p.rounds, at, out, nil)
	}
	if len(out) == 0 {
		return events
	}
	return append(append(make([]decide.Event, 0, len(events)+len(out)), events...), out...)
}
