package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
)

// ReserveFileName is the space the store keeps in data_dir for the state
// file's growth after the filesystem fills: a file of zeros, written for
// real (not sparse). When a commit fails for want of space, the store
// deletes it and commits again into the room it leaves; it writes it
// again once there is room.
const ReserveFileName = "vigil.reserve"

// Reserve sizes: twice the state file, within these bounds. A state file
// grows until the journal reaches its bound, then reuses its own free
// pages, so twice its size lasts far longer than the file's growth.
const (
	MinReserve = 4 << 20
	MaxReserve = 256 << 20
)

// reserveRetry is how often the store tries to write its reserve again
// after using it (or failing to write it). Tests change it
// (export_test.go).
var reserveRetry atomic.Int64

func init() { reserveRetry.Store(int64(time.Minute)) }

// ReserveEvent is what the store says about its reserve (OnReserve).
type ReserveEvent struct {
	// Released is set when a commit found the filesystem full and the
	// store deleted its reserve to go on committing; Restored when it
	// wrote it again; neither when it could not write it (Err).
	Released, Restored bool
	// Size is the reserve's size in bytes.
	Size int64
	Err  error
}

// reserveSize is the reserve for a state file of dbSize bytes.
func reserveSize(dbSize int64) int64 {
	return min(max(2*dbSize, MinReserve), MaxReserve)
}

// isNoSpace reports whether err is the filesystem's "no space left".
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// writeReserve writes the reserve file of size bytes in dir, unless one
// of that size is there. It never leaves a part of one: when the room
// runs out it deletes what it wrote.
func writeReserve(dir string, size int64) error {
	path := filepath.Join(dir, ReserveFileName)
	if fi, err := os.Stat(path); err == nil && fi.Size() >= size {
		return nil
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("store: writing the space reserve %s: %w", path, err)
	}
	chunk := make([]byte, 1<<20)
	var werr error
	for left := size; left > 0 && werr == nil; left -= int64(len(chunk)) {
		_, werr = f.Write(chunk[:min(left, int64(len(chunk)))])
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("store: writing the space reserve %s (%d bytes): %w", path, size, werr)
	}
	return nil
}

// ensureReserve writes the reserve when it is missing and it is time to
// try again, and reports what happened. Called with reserveMu held.
func (s *Bolt) ensureReserve(now time.Time) {
	if s.reserveHeld || (!s.reserveTried.IsZero() && now.Sub(s.reserveTried) < time.Duration(reserveRetry.Load())) {
		return
	}
	s.reserveTried = now
	var size int64 = MinReserve
	if fi, err := os.Stat(s.path); err == nil {
		size = reserveSize(fi.Size())
	}
	err := writeReserve(s.dir, size)
	restored := err == nil && s.reserveUsed
	if err == nil {
		s.reserveHeld, s.reserveUsed, s.reserveSize = true, false, size
	}
	if s.onReserve != nil && (err != nil || restored) {
		s.onReserve(ReserveEvent{Restored: restored, Size: size, Err: err})
	}
}

// releaseReserve deletes the reserve after a commit failed for want of
// space, and reports whether there was one to delete. Called with
// reserveMu held.
func (s *Bolt) releaseReserve(now time.Time) bool {
	if !s.reserveHeld {
		return false
	}
	if err := os.Remove(filepath.Join(s.dir, ReserveFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false
	}
	s.reserveHeld, s.reserveUsed = false, true
	s.reserveTried = now
	if s.onReserve != nil {
		s.onReserve(ReserveEvent{Released: true, Size: s.reserveSize})
	}
	return true
}

// ReserveInUse reports whether the store used its space reserve (a write
// found the filesystem full) and has not written it again since: data_dir
// is full, or was until the next try to write the reserve.
func (s *Bolt) ReserveInUse() bool {
	s.reserveMu.Lock()
	defer s.reserveMu.Unlock()
	return s.reserveUsed
}
