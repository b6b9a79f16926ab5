package edge

import "time"

// SetClock makes h read the time from now: the removal tests move it past
// RemoveAfter and DrainTimeout instead of waiting.
func SetClock(h *HAProxy, now func() time.Time) { h.now = now }
