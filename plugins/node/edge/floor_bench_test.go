//go:build linux

package edge_test

import (
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/vigilcdn/vigil/internal/benchproc"
)

// The floors of BenchmarkEdgeWrk: two TCP relays that do none of a proxy's
// work (no HTTP, an origin connection of its own per visitor connection),
// to tell what a Go process's scheduling costs from what vigil-node's proxy
// does. go-forwarder is the usual Go design, a goroutine copying each way;
// go-event-loop is HAProxy's, a thread per core (GOMAXPROCS) relaying from
// an epoll instance of its own. They are measurements, not proxies: the
// event loop writes with a blocking poll when the peer is full, which only
// a benchmark's peers can afford. Both are Linux only (epoll).

// startFloor runs the floor test (TestGoForwarderProcess or
// TestGoEventLoopProcess) in a process of its own, relaying to origin.
func startFloor(b *testing.B, test, origin string) (string, int) {
	return benchproc.Start(b, test, benchproc.Options{
		Env:  []string{"VIGIL_FLOOR_ORIGIN=" + origin},
		Wrap: func(bin string, args []string) (string, []string) { return pinned(bin, args...) },
	})
}

// floorListen is a floor process's listener, or a skip when it runs alone.
func floorListen(t *testing.T) (net.Listener, string) {
	origin := os.Getenv("VIGIL_FLOOR_ORIGIN")
	if origin == "" {
		t.Skip("a floor process of BenchmarkEdgeWrk, which starts it")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln, origin
}

// TestGoForwarderProcess is the go-forwarder floor.
func TestGoForwarderProcess(t *testing.T) {
	ln, origin := floorListen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", origin)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c) }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	benchproc.Announce(ln.Addr().String())
	_ = ln.Close()
}

// TestGoEventLoopProcess is the go-event-loop floor: connections are
// accepted and dialled through Go's net package, then their descriptors
// go to the epoll instance of one of the loops, in turn.
func TestGoEventLoopProcess(t *testing.T) {
	ln, origin := floorListen(t)
	var mu sync.Mutex
	peer := map[int32]int32{} // each descriptor's other end
	loops := make([]int, runtime.GOMAXPROCS(0))
	for i := range loops {
		ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		loops[i] = ep
		go relayLoop(ep, func(fd int32) (int32, bool) {
			mu.Lock()
			defer mu.Unlock()
			p, ok := peer[fd]
			return p, ok
		}, func(a, b int32) {
			mu.Lock()
			delete(peer, a)
			delete(peer, b)
			mu.Unlock()
		})
	}
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", origin)
			if err != nil {
				c.Close()
				continue
			}
			v, o := takeFD(c), takeFD(u)
			if v < 0 || o < 0 {
				continue
			}
			mu.Lock()
			peer[v], peer[o] = o, v
			mu.Unlock()
			ep := loops[i%len(loops)]
			for _, fd := range []int32{v, o} {
				ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLET&0xffffffff, Fd: fd}
				_ = syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, int(fd), &ev)
			}
		}
	}()
	benchproc.Announce(ln.Addr().String())
	_ = ln.Close()
}

// takeFD duplicates c's descriptor and closes c, which takes it off Go's
// poller (the duplicate stays non-blocking).
func takeFD(c net.Conn) int32 {
	defer c.Close()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return -1
	}
	fd := int32(-1)
	_ = raw.Control(func(s uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if e == 0 {
			fd = int32(r)
		}
	})
	return fd
}

// relayLoop is one loop: on its own thread, it waits in epoll_wait and
// copies what each descriptor has to its peer.
func relayLoop(ep int, peerOf func(int32) (int32, bool), forget func(a, b int32)) {
	runtime.LockOSThread()
	events := make([]syscall.EpollEvent, 256)
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.EpollWait(ep, events, -1)
		if err != nil {
			continue // EINTR
		}
		for _, ev := range events[:n] {
			fd := ev.Fd
			to, ok := peerOf(fd)
			if !ok {
				continue
			}
			if !relay(int(fd), int(to), buf) {
				forget(fd, to)
				_ = syscall.Close(int(fd))
				_ = syscall.Close(int(to))
			}
		}
	}
}

// relay copies from until it has nothing more; false when either end is
// done.
func relay(from, to int, buf []byte) bool {
	for {
		m, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(from), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		if e == syscall.EAGAIN {
			return true
		}
		if e != 0 || m == 0 {
			return false
		}
		for off := 0; off < int(m); {
			w, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(to), uintptr(unsafe.Pointer(&buf[off])), uintptr(int(m)-off))
			switch e {
			case 0:
				off += int(w)
			case syscall.EAGAIN:
				time.Sleep(50 * time.Microsecond) // the peer is full: wait for it
			default:
				return false
			}
		}
	}
}
