//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import (
	"os"
	"time"
)

// lockFile is a no-op here: bbolt's own lock still refuses a second
// writer when it opens the file.
func lockFile(*os.File, bool, time.Duration) error { return nil }

func unlockFile(*os.File) error { return nil }
