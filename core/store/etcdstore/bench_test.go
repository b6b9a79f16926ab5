package etcdstore_test

import (
	"context"
	"fmt"
	"testing"

	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// BenchmarkFleetIncident times the commit of the incident round of the
// 500-site fleet (every site fails over: 500 records and 2,000 events):
// split on etcd at its default --max-txn-ops 128, and in one transaction
// on an etcd that allows 10,000, side by side. Each iteration commits the
// fleet's first round under a fresh prefix first (not timed).
//
//	go test -run '^$' -bench FleetIncident -benchtime 10x ./core/store/etcdstore/
func BenchmarkFleetIncident(b *testing.B) {
	for _, bb := range []struct {
		name string
		ops  int
		args []string
	}{
		{"split at 128", 128, nil},
		{"one transaction", 10000, []string{"--max-txn-ops", "10000", "--max-request-bytes", "10485760"}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			srv := etcdtest.Start(b, bb.args...)
			cli := srv.Client(b)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				b.StopTimer()
				i++
				s := newStore(cli, etcdstore.Options{Prefix: fmt.Sprintf("/bench%d", i), MaxTxnOps: bb.ops})
				if err := s.Commit(ctx, fleetRound(1)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := s.Commit(ctx, fleetRound(2)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(fleetSites), "sites/commit")
		})
	}
}
