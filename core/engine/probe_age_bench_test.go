package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
)

// BenchmarkProbeAgeScrape is the cost of vigil_site_probe_age_seconds at
// a scrape: one pass over the sites, two series out whatever the fleet.
// Compare the ns/site of the sizes.
func BenchmarkProbeAgeScrape(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("sites=%d", n), func(b *testing.B) {
			cfg := enginetest.Config(b, fleetConfig(b, n))
			st, err := store.Open(b.TempDir(), 0)
			if err != nil {
				b.Fatal(err)
			}
			src := enginetest.NewSource("direct")
			reg := prometheus.NewPedanticRegistry()
			e, diags := engine.New(context.Background(), cfg, engine.Options{Store: st, Registerer: reg,
				NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource { return src }})
			if diags.HasErrors() {
				b.Fatal(diags.Error())
			}
			b.Cleanup(func() { e.Close(); st.Close() })
			e.RunRound(context.Background())
			// Only the probe-age collector: a registry of it alone.
			only := prometheus.NewRegistry()
			only.MustRegister(engine.ProbeAgeCollector(e))
			b.ReportAllocs()
			for b.Loop() {
				mfs, err := only.Gather()
				if err != nil || len(mfs) != 2 || mfs[1].GetMetric()[0].GetHistogram().GetSampleCount() != uint64(n) {
					b.Fatalf("gather: %v, %d families", err, len(mfs))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/site")
		})
	}
}
