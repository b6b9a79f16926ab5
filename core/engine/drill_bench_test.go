package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
)

// BenchmarkDrillRoundOverhead is what running drills add to a round's
// cost per probed site (BenchmarkRoundOverhead's steady round): each
// round looks at every site for a drill whose time is up, and settles
// the drilled origins itself. Compare the ns/site of drills=0 with the
// others: the drills should cost next to nothing.
func BenchmarkDrillRoundOverhead(b *testing.B) {
	const n = 10000
	cfg := enginetest.Config(b, fleetConfig(b, n))
	for _, drills := range []int{0, 1, 100} {
		b.Run(fmt.Sprintf("sites=%d/drills=%d", n, drills), func(b *testing.B) {
			e, _ := enginetest.Start(b, cfg, enginetest.Sources{}, b.TempDir())
			ctx := context.Background()
			for range 3 { // past the start: every origin healthy
				e.RunRound(ctx)
			}
			for s := range drills {
				if _, err := e.StartDrill(ctx, fmt.Sprintf("s%06d", s*(n/max(drills, 1))), engine.DrillRequest{For: engine.MaxDrill}, "bench"); err != nil {
					b.Fatal(err)
				}
			}
			for range 4 { // the drilled sites fail over: steady again
				e.RunRound(ctx)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if res := e.RunRound(ctx); res.Probed != n || !res.Saved {
					b.Fatalf("round probed %d of %d sites, saved %v", res.Probed, n, res.Saved)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/site")
		})
	}
}
