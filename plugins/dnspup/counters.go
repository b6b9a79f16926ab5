package dnspup

import (
	"maps"
	"sync"
)

// counters are monotonic counts by label. The SDK has no channel for plugin
// metrics yet, so they are kept here, named in log lines, and read by tests
// through Source.Abstentions and Source.Requests.
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
