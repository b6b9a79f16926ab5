package store

import "time"

// SetReserveRetry makes the store try to write its space reserve again d
// after using it, instead of a minute, until the test ends.
func SetReserveRetry(t interface{ Cleanup(func()) }, d time.Duration) {
	old := reserveRetry.Swap(int64(d))
	t.Cleanup(func() { reserveRetry.Store(old) })
}
