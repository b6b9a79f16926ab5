//go:build unix

package proxy

import (
	"net"
	"syscall"
)

// idleClean reports whether an idle connection may carry a request: the
// origin neither closed it (its keep-alive timeout may be shorter than
// ours: 5s for Node and Apache) nor sent anything unasked (a late 408, or
// a body after a HEAD, 204 or 304 answer, which would be taken for the
// next request's answer). It peeks without blocking: one recv syscall,
// where http.Transport keeps a reading goroutine per idle connection.
func idleClean(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	clean := false
	var b [1]byte
	// Control, not Read: Read would answer a read deadline left from the
	// last answer without asking the socket.
	if err := raw.Control(func(fd uintptr) {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		clean = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
	}); err != nil {
		return false
	}
	return clean
}
