//go:build !linux

package store

// dropPages does nothing where madvise is not used.
func (s *Bolt) dropPages() {}
