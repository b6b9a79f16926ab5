//go:build unix

package proxy

import "syscall"

// idleClean reports whether an idle connection may carry a request: the
// origin neither closed it (its keep-alive timeout may be shorter than
// ours: 5s for Node and Apache) nor sent anything unasked (a late 408, or
// a body after a HEAD, 204 or 304 answer, which would be taken for the
// next request's answer). It peeks without blocking: one recv syscall,
// where http.Transport keeps a reading goroutine per idle connection. The
// connection's RawConn and peek function are made once, at its first
// peek, so that a reuse allocates nothing.
func idleClean(c *upConn) bool {
	if pc, ok := c.c.(interface{ idleClean() bool }); ok {
		return pc.idleClean() // on the FIFO poller
	}
	if c.peek == nil {
		sc, ok := c.c.(syscall.Conn)
		if !ok {
			return true
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		c.raw = raw
		c.peek = func(fd uintptr) {
			_, _, err := syscall.Recvfrom(int(fd), c.peekBuf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			c.peekClean = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		}
	}
	c.peekClean = false
	// Control, not Read: Read would answer a read deadline left from the
	// last answer without asking the socket.
	if err := c.raw.Control(c.peek); err != nil {
		return false
	}
	return c.peekClean
}
