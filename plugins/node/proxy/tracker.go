package proxy

import (
	"sync"
	"time"
)

// tracker counts recent failures per origin and says which are skipped.
type tracker struct {
	now     func() time.Time
	count   int
	window  time.Duration
	skipFor time.Duration

	mu sync.Mutex
	m  map[originKey]*health
}

type originKey struct{ site, origin, address string }

type health struct {
	fails     []time.Time // within the window, oldest first
	skipUntil time.Time
}

func newTracker(now func() time.Time, count int, window, skipFor time.Duration) *tracker {
	return &tracker{now: now, count: count, window: window, skipFor: skipFor, m: map[originKey]*health{}}
}

// failed records a failure of k and reports whether k is now skipped
// (it was not before).
func (t *tracker) failed(k originKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	h := t.m[k]
	if h == nil {
		h = &health{}
		t.m[k] = h
	}
	if now.Before(h.skipUntil) {
		return false // already skipped (it was tried because all were)
	}
	cut := 0
	for cut < len(h.fails) && now.Sub(h.fails[cut]) >= t.window {
		cut++
	}
	h.fails = append(h.fails[cut:], now)
	if len(h.fails) >= t.count {
		h.fails = h.fails[:0]
		h.skipUntil = now.Add(t.skipFor)
		return true
	}
	return false
}

// skipped reports whether k is skipped now.
func (t *tracker) skipped(k originKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.m[k]
	return h != nil && t.now().Before(h.skipUntil)
}

// keep forgets origins not in live (after a new publication).
func (t *tracker) keep(live map[originKey]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.m {
		if !live[k] {
			delete(t.m, k)
		}
	}
}
