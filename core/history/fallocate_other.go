//go:build !linux

package history

import "os"

// reserve gives f its full size (sparse where the platform has no
// fallocate).
func reserve(f *os.File, size int64) error { return f.Truncate(size) }
