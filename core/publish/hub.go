package publish

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// Hub holds the latest snapshot. It is safe for concurrent use.
type Hub struct {
	mu      sync.Mutex
	snap    *publication.Snapshot
	changed chan struct{} // closed and replaced on every publish
	waiting atomic.Int64
}

// Waiting is how many callers of Wait are waiting for a newer snapshot
// now: the followers (nodes, publishers) holding a long poll.
func (h *Hub) Waiting() int { return int(h.waiting.Load()) }

// NewHub returns a hub holding an empty snapshot at version 0.
func NewHub() *Hub {
	return &Hub{snap: &publication.Snapshot{}, changed: make(chan struct{})}
}

// Publish makes s the current snapshot and wakes every waiter. A snapshot
// whose version is not newer than the current one is ignored. The caller
// must not modify s afterwards.
func (h *Hub) Publish(s *publication.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.Version <= h.snap.Version && h.snap.Version != 0 {
		return
	}
	h.snap = s
	close(h.changed)
	h.changed = make(chan struct{})
}

// Current returns the current snapshot. Callers must not modify it.
func (h *Hub) Current() *publication.Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snap
}

// Wait returns the first snapshot with a version greater than after, or
// the current one and false when ctx ends first.
func (h *Hub) Wait(ctx context.Context, after uint64) (*publication.Snapshot, bool) {
	h.waiting.Add(1)
	defer h.waiting.Add(-1)
	for {
		h.mu.Lock()
		snap, changed := h.snap, h.changed
		h.mu.Unlock()
		if snap.Version > after {
			return snap, true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return snap, false
		}
	}
}
