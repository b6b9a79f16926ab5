package partition_test

import (
	"fmt"
	"testing"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/partition"
)

// BenchmarkObserve is the rule's cost per origin and round, what the
// engine and simulate pay after each round for each origin judged:
// agree (every group up, the common round: nothing is kept), alone (one
// pop down against the others, suspected after 3 rounds and lasting).
// Four groups of two votes an origin.
func BenchmarkObserve(b *testing.B) {
	for _, mode := range []string{"agree", "alone"} {
		b.Run(mode, func(b *testing.B) {
			var m partition.Memory
			var tally partition.Tally
			const origins = 1000
			keys := make([]partition.Origin, origins)
			for i := range keys {
				keys[i] = partition.Origin{Site: fmt.Sprintf("s%04d", i), Origin: "a"}
			}
			groups := []string{"node/pop=eu", "node/pop=us", "node/pop=ap", "direct"}
			var events []decide.Event
			var susp []partition.Streak
			b.ReportAllocs()
			for round := 0; b.Loop(); round++ {
				events = events[:0]
				for _, k := range keys {
					tally.Reset()
					for gi, g := range groups {
						up := mode == "agree" || gi > 0
						tally.Add(g, up)
						tally.Add(g, up)
					}
					events, susp = m.Observe(k, &tally, 3, int64(round), events, susp[:0])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/origins, "ns/origin")
		})
	}
}
