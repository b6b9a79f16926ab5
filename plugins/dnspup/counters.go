package dnspup

import (
	"maps"
	"sync"
)

// counters are monotonic counts by label: the source's metrics
// (Source.Metrics, which vigil shows on /metrics), also read by tests
// through Source.Abstentions, Source.Requests and Source.QuotaSpend.
type counters struct {
	mu sync.Mutex
	m  map[string]uint64
}

func (c *counters) add(label string, n int) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]uint64{}
	}
	c.m[label] += uint64(n)
	return c.m[label]
}

func (c *counters) snapshot() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}
