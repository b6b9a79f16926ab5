//go:build linux

package store

import (
	"os"
	"syscall"
)

// dropPages tells the kernel that the pages of the state file this
// process touched need not stay in its resident memory: a Load reads every
// page, tens of megabytes at 100,000 sites, and only a few are needed
// again. The pages stay in the page cache, and a later read faults them
// back in. It runs inside a read transaction, so bbolt cannot remap the
// file meanwhile.
func (s *Bolt) dropPages() {
	tx, err := s.db.Begin(false)
	if err != nil {
		return
	}
	defer func() { _ = tx.Rollback() }()
	fi, err := os.Stat(s.db.Path())
	if err != nil || fi.Size() <= 0 {
		return
	}
	info := s.db.Info()
	size := int(fi.Size()) &^ (os.Getpagesize() - 1)
	if size == 0 {
		return
	}
	// bbolt gives the mapping's address as a uintptr; the raw call takes
	// it as one, so no pointer is made from an integer.
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, info.Data, uintptr(size), syscall.MADV_DONTNEED)
}
