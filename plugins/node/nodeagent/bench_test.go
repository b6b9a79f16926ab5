package nodeagent

import (
	"slices"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
)

// BenchmarkPublishToServe measures the time from a publish on the control
// plane (a level switch) to the node serving the new level: the long-poll
// answer, the snapshot applied to the proxy, and a visitor request through
// the proxy that reaches the new level's origin. The node keeps a state
// directory, as in production.
func BenchmarkPublishToServe(b *testing.B) {
	cp := fakecp.New()
	b.Cleanup(cp.Close)
	addrs := map[int]string{1: named(b, "level-1"), 2: named(b, "level-2")}
	v := cp.Publish(site(1, addrs[1]))
	r := startAgent(b, Config{ControlPlane: cp.URL(), StateDir: b.TempDir()})
	r.await(b, EventPublication, v)
	var took []time.Duration
	b.ResetTimer()
	for i := range b.N {
		level := 2 - i%2
		start := time.Now()
		v := cp.Publish(site(level, addrs[level]))
		r.await(b, EventPublication, v)
		code, body := get(b, r)
		took = append(took, time.Since(start))
		if want := map[int]string{1: "level-1", 2: "level-2"}[level]; code != 200 || body != want {
			b.Fatalf("after publishing level %d: %d %q", level, code, body)
		}
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms/switch")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms/switch")
}
