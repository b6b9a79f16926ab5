//go:build linux && race

package proxy

import (
	"errors"
	"syscall"
)

// rawRead and rawWrite, in race builds, go through syscall.Read and Write:
// their annotations make a socket's write and the peer's read a
// happens-before edge for the race detector, as it expects of all socket
// I/O (raw syscalls would make data handed over a connection look racy).
func rawRead(fd int, b []byte) (int, syscall.Errno) {
	n, err := syscall.Read(fd, b)
	return n, errno(err)
}

func rawWrite(fd int, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(fd, b)
	return n, errno(err)
}

func errno(err error) syscall.Errno {
	var e syscall.Errno
	if err != nil && !errors.As(err, &e) {
		return syscall.EIO
	}
	return e
}
