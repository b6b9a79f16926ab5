package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
)

// BenchmarkHistoryOverhead is the history's cost per round beside
// BenchmarkRoundOverhead's: 10,000 sites of two origins, every site probed
// every round, side by side in one run. without: the round alone. handoff:
// the round and AfterRound (what delays the next round: the verdicts
// copied into a batch for the writer). written: the same, then waiting for
// the writer to put the round in the file (the whole work, serialized).
// observer: the feed registered as the engine's Observer, as the agent
// wires it (the handoff inside the round's commit). Compare the ns/site:
// the ratios are the overhead.
func BenchmarkHistoryOverhead(b *testing.B) {
	const n = 10000
	cfg := enginetest.Config(b, fleetConfig(b, n))
	for _, mode := range []string{"without", "handoff", "written", "observer"} {
		b.Run(fmt.Sprintf("sites=%d/%s", n, mode), func(b *testing.B) {
			dir := b.TempDir()
			e, _ := enginetest.Start(b, cfg, enginetest.Sources{}, dir)
			var h *engine.HistoryFeed
			if mode != "without" {
				h = engine.OpenHistory(dir, e, engine.HistoryOptions{})
				b.Cleanup(func() { h.Close() })
			}
			if mode == "observer" {
				e.Observe(h)
			}
			ctx := context.Background()
			for range 3 {
				res := e.RunRound(ctx)
				if mode != "observer" {
					h.AfterRound(res)
				}
				h.Flush()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				res := e.RunRound(ctx)
				if res.Probed != n || !res.Saved {
					b.Fatalf("round probed %d of %d sites, saved %v", res.Probed, n, res.Saved)
				}
				if mode != "observer" {
					h.AfterRound(res)
				}
				if mode == "written" {
					h.Flush()
				}
			}
			b.StopTimer()
			h.Flush()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/site")
		})
	}
}
