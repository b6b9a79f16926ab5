package history

import (
	"errors"
	"os"
	"syscall"
)

// reserve gives f its full size with the blocks allocated, so that a later
// write into it cannot fail for want of space. A filesystem without
// fallocate gets a sparse file instead.
func reserve(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return f.Truncate(size)
	}
	return err
}
