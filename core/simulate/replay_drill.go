package simulate

import (
	"context"
	"fmt"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/vote"
)

// Failover drills in a replay (docs/drills.md, docs/replay.md): a
// recorded verdict settled by the drill (a point's "by" is "drill") was an
// operator's rehearsal, not a probe's finding. The replay treats it as what
// it was: the drill's down verdict, settled before any source of the
// replayed chain, whatever that chain's min_votes, tally and order; the
// real sources' votes recorded in those rounds (asked, shown, never
// counted) are not counted in the replay either. So a replay reproduces
// the drill's failover, and a what-if of another chain is not mistaken
// for one the probes would have made.

// drillSourceName is how an export names the drill's settling: the chain
// index one past the recording's sources (the engine appends the drill's
// link to its chain), named once the export knows the chain's names.
func drillSourceName(i int8, sources []string) (string, bool) {
	if len(sources) > 0 && int(i) == len(sources) {
		return api.DrillSource, true
	}
	return "", false
}

// drillRounds maps a recorded round (its time, Unix milliseconds) to the origins ("site/
// origin") the drill settled in it.
type drillRounds map[int64]map[string]bool

func (x *Export) drillRounds() (drillRounds, int) {
	out := drillRounds{}
	n := 0
	for _, o := range x.Origins {
		for _, p := range o.Points {
			if p.By != api.DrillSource {
				continue
			}
			if out[p.At()] == nil {
				out[p.At()] = map[string]bool{}
			}
			out[p.At()][o.Site+"/"+o.Origin] = true
			n++
		}
	}
	return out, n
}

// drillSource asks inner, then gives each origin the drill settled in the
// round the drill's verdict instead: min_votes down votes from the first
// source of its site's chain, and nothing from the others.
type drillSource struct {
	inner vote.Source
	f     *fleet.Fleet
	round map[string]bool
}

func (d *drillSource) Ask(ctx context.Context, source int, targets []vote.Target, counts []vote.Counts) {
	d.inner.Ask(ctx, source, targets, counts)
	if len(d.round) == 0 {
		return
	}
	for i, tg := range targets {
		s := d.f.Sites[tg.Site]
		if !d.round[s.Spec.Name+"/"+s.Spec.Origins[tg.Origin].Name] {
			continue
		}
		counts[i] = vote.Counts{}
		if len(s.SourceList) > 0 && s.SourceList[0] == source {
			counts[i].Down = int32(max(d.f.Chain[source].Rule.MinVotes, 1))
		}
	}
}

func drillWarning(n int) string {
	return fmt.Sprintf("%d recorded verdicts were a failover drill's (by %q): replayed as the drill's down verdicts, before this configuration's chain (docs/drills.md)", n, api.DrillSource)
}
