//go:build linux && !race

package proxy

import (
	"syscall"
	"unsafe"
)

// rawRead and rawWrite are read(2) and write(2) on a non-blocking socket,
// which never sleep in the kernel. They are raw (no entersyscall) so that a
// thread the kernel preempts inside one does not have its P handed to
// another thread: on cores shared with busy processes, that handing-off
// (sysmon retakes a P whose syscall outlasts 20 us) woke thread after
// thread and moved goroutines between them. (Race builds use syscall.Read
// and Write instead, fifopoll_race.go.)
func rawRead(fd int, b []byte) (int, syscall.Errno) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(p), uintptr(len(b)))
	return int(n), e
}

func rawWrite(fd int, b []byte) (int, syscall.Errno) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(p), uintptr(len(b)))
	return int(n), e
}
