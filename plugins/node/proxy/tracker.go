package proxy

import (
	"sync"
	"sync/atomic"
	"time"
)

// tracker counts recent failures per origin and says which are skipped.
//
// The map is only touched when a publication is applied: each origin of the
// served state holds its *health, so a request reads an origin's skip with
// one atomic load and records a failure under that origin's own lock, never
// a lock shared by every request.
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
	mu        sync.Mutex
	fails     []time.Time // within the window, oldest first
	skipUntil atomic.Pointer[time.Time]
}

func newTracker(now func() time.Time, count int, window, skipFor time.Duration) *tracker {
	return &tracker{now: now, count: count, window: window, skipFor: skipFor, m: map[originKey]*health{}}
}

// get returns k's health, created when k is new.
func (t *tracker) get(k originKey) *health {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.m[k]
	if h == nil {
		h = &health{}
		t.m[k] = h
	}
	return h
}

// failed records a failure of h and reports whether h is now skipped
// (it was not before).
func (t *tracker) failed(h *health) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := t.now()
	if u := h.skipUntil.Load(); u != nil {
		if now.Before(*u) {
			return false // already skipped (it was tried because all were)
		}
		if now.Sub(*u) < t.window {
			// On probation: its skip ended within the window and no
			// success came since. One failure skips it again, as nginx
			// keeps a server's failures until it answers.
			h.fails = h.fails[:0]
			until := now.Add(t.skipFor)
			h.skipUntil.Store(&until)
			return true
		}
	}
	cut := 0
	for cut < len(h.fails) && now.Sub(h.fails[cut]) >= t.window {
		cut++
	}
	h.fails = append(h.fails[cut:], now)
	if len(h.fails) >= t.count {
		h.fails = h.fails[:0]
		until := now.Add(t.skipFor)
		h.skipUntil.Store(&until)
		return true
	}
	return false
}

// succeeded records a success of h: an origin whose skip has ended is off
// probation. Only an origin once skipped pays more than one atomic load.
func (t *tracker) succeeded(h *health) {
	if u := h.skipUntil.Load(); u != nil && !t.now().Before(*u) {
		h.skipUntil.CompareAndSwap(u, nil)
	}
}

// skipped reports whether h is skipped at now.
func (t *tracker) skipped(h *health, now time.Time) bool {
	u := h.skipUntil.Load()
	return u != nil && now.Before(*u)
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
