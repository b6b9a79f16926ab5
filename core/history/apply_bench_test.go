package history

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkApply is the writer's own work on one origin's record, a
// version 4 entry and a version 5 run side by side in one run (the record
// in memory: the file's reads and writes are the records' sizes, 1,824
// and 1,584 bytes). steady: every round alike (a run grows); flapping:
// the verdict changes every round (a run a round).
func BenchmarkApply(b *testing.B) {
	v4 := buildLayout(60, VoteSlots, GroupSlots, groupTableSize, 1, true)
	v5 := newLayout(DefaultRounds, 1)
	for _, pattern := range []string{"steady", "flapping"} {
		for _, c := range []struct {
			name  string
			l     layout
			apply func(l layout, rec []byte, unix int64, ms uint16, o Obs)
		}{
			{"v4", v4, layout.apply},
			{"v5", v5, func(l layout, rec []byte, unix int64, _ uint16, o Obs) {
				l.applyRun(rec, unix, uint32(unix/30), o) // a round every 30 s
			}},
		} {
			b.Run(fmt.Sprintf("%s/%s", pattern, c.name), func(b *testing.B) {
				rec := make([]byte, c.l.recordSize)
				o := Obs{Verdict: Up, By: 0, State: Healthy, Latency: 3 * time.Millisecond, NVotes: 2}
				o.Votes[0] = Tally{Source: 0, Up: 5, Abstain: 1}
				o.Votes[1] = Tally{Source: 1, Up: 3}
				at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
				i := 0
				for b.Loop() {
					if pattern == "flapping" {
						o.Verdict = Verdict(1 + i%2)
					}
					t := at + int64(i)*30_000
					c.apply(c.l, rec, t/1000, uint16(t%1000), o)
					sealRecord(rec)
					i++
				}
			})
		}
	}
}
