package edge

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkStatsRead: parsing one show stat answer of 1000 sites of 3
// servers each and turning it into deltas, vigil-node's work per
// -passive-interval with HAProxy (reported per read and per server).
func BenchmarkStatsRead(b *testing.B) {
	const sites, perSite = 1000, 3
	var sb strings.Builder
	sb.WriteString(statHeader + "\n")
	for i := range sites {
		for j := range perSite {
			sb.WriteString(statLine(fmt.Sprintf("site%d", i), fmt.Sprintf("o%d", j), j+1, 1, 2, 3, [5]uint64{0, uint64(1000 + i), 5, 7, 9}) + "\n")
		}
	}
	text := sb.String()
	var tr StatsTracker
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		s, err := ParseStat(text)
		if err != nil {
			b.Fatal(err)
		}
		tr.Update("p1", s)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(sites*perSite), "ns/server")
}
