package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/engine/enginetest"
)

// fleetConfig is n sites of two origins on two levels, every site probed
// each round.
func fleetConfig(tb testing.TB, n int) string {
	tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "control { sites_per_round = %d }\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n", n)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "site \"s%06d\" {\n  hostname = \"s%06d.example.com\"\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" {\n    address = \"http://127.0.0.1:2\"\n    level = 2\n  }\n}\n", i, i)
	}
	return b.String()
}

// BenchmarkRoundOverhead is the engine's own cost of a round per probed
// site, outside the probes: an in-process source answers at once, and
// every site is probed. steady: nothing changes (the common round);
// churn: a tenth of the sites' primaries fail or recover every round, so
// records, views, the publication and the journal move. Compare the
// ns/site of the sizes: the cost per site should not grow with the fleet.
func BenchmarkRoundOverhead(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		cfg := enginetest.Config(b, fleetConfig(b, n))
		for _, mode := range []string{"steady", "churn"} {
			b.Run(fmt.Sprintf("sites=%d/%s", n, mode), func(b *testing.B) {
				src := enginetest.Sources{}
				e, _ := enginetest.Start(b, cfg, src, b.TempDir())
				ctx := context.Background()
				for range 3 { // past the start: every origin healthy
					e.RunRound(ctx)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					if mode == "churn" {
						b.StopTimer()
						for s := i % 10; s < n; s += 10 {
							src["direct"].SetDown(fmt.Sprintf("s%06d", s), "a", i%20 < 10)
						}
						b.StartTimer()
					}
					if res := e.RunRound(ctx); res.Probed != n || !res.Saved {
						b.Fatalf("round probed %d of %d sites, saved %v", res.Probed, n, res.Saved)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/site")
			})
		}
	}
}
