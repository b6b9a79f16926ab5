//go:build linux

package proxy

import (
	"fmt"
	"iter"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// The event loops. With a goroutine per connection, a proxy sharing its
// cores with busy processes had a p99 2.2-2.5 times HAProxy's: every wait
// parks a goroutine, the scheduler wakes another thread to run it, and a
// thread the kernel has descheduled holds the goroutines queued on it. A
// goroutine-per-connection relay with no HTTP at all showed the same, an
// event loop per core did not (BenchmarkEdgeWrk's floors).
//
// So the raw path runs as HAProxy does: one loop per GOMAXPROCS, each on a
// thread of its own, sleeping in epoll_wait on an instance of its own, and
// woken by the kernel when one of its connections is ready. Each visitor
// connection is a coroutine (iter.Pull) on one loop: its code is the same
// blocking-style code as before, but a read or write that would block
// yields to the loop instead of parking (pollConn.wait), and the loop
// resumes it on the same thread when its descriptor is ready. The origin
// pool keeps each loop's idle connections apart (upstream.takeLocked); one
// a task takes from elsewhere moves to its loop's instance (pollConn.bind).
// What a coroutine must wait for elsewhere (a dial, a
// deadline, a Close from another goroutine) is posted to the loop, which an
// eventfd wakes.

// coLoop is one event loop.
type coLoop struct {
	id   int      // its number, from 1 (connLoop)
	ep   int      // its epoll instance
	evfd int      // eventfd: posted tasks are waiting
	reg  registry // the connections registered on ep

	mu     sync.Mutex
	posted []*coTask // tasks to resume, posted from anywhere
	spare  []*coTask

	round  uint64 // epoll_wait calls, to resume a task once per round
	events [256]syscall.EpollEvent
	resume []*coTask
	hungUp []*func() // idle connections' hang-ups of this round
}

// coTask is one visitor connection's coroutine on a loop.
type coTask struct {
	loop  *coLoop
	fn    func(*coTask) // its code, until the loop makes the coroutine
	next  func() (struct{}, bool)
	yield func(struct{}) bool

	queued atomic.Bool // posted, not yet resumed
	// done and round are the loop thread's only.
	done  bool
	round uint64
}

var (
	loopsOnce sync.Once
	loops     []*coLoop
	loopsErr  error
	loopTurn  atomic.Uint32
)

// nextLoop returns a loop to start a connection on, in turn, or the reason
// there is none (then the Server runs a goroutine per connection). The
// loops are made at the first call: n of them (0: GOMAXPROCS), for the
// life of the process.
func nextLoop(n int) (*coLoop, error) {
	loopsOnce.Do(func() {
		if n <= 0 {
			n = runtime.GOMAXPROCS(0)
		}
		var ls []*coLoop
		for i := range n {
			l, err := newLoop()
			if err != nil {
				loopsErr = err
				return
			}
			l.id = i + 1
			ls = append(ls, l)
		}
		for _, l := range ls {
			go l.run()
		}
		loops = ls
	})
	if loopsErr != nil {
		return nil, loopsErr
	}
	return loops[int(loopTurn.Add(1))%len(loops)], nil
}

func newLoop() (*coLoop, error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("proxy loop: epoll_create1: %w", err)
	}
	r, _, e := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		_ = syscall.Close(ep)
		return nil, fmt.Errorf("proxy loop: eventfd: %w", e)
	}
	l := &coLoop{ep: ep, evfd: int(r)}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(l.evfd)}
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, l.evfd, &ev); err != nil {
		_ = syscall.Close(ep)
		_ = syscall.Close(l.evfd)
		return nil, fmt.Errorf("proxy loop: epoll_ctl: %w", err)
	}
	return l, nil
}

// start runs fn as a new task on l; fn gets its task. The coroutine is
// made by the loop itself: Go wants a coroutine resumed by the thread-locked
// goroutine that made it.
func (l *coLoop) start(fn func(*coTask)) {
	l.post(&coTask{loop: l, fn: fn})
}

// post asks l to resume t (from any goroutine, t's own included).
func (l *coLoop) post(t *coTask) {
	if !t.queued.CompareAndSwap(false, true) {
		return // posted already
	}
	l.mu.Lock()
	l.posted = append(l.posted, t)
	first := len(l.posted) == 1
	l.mu.Unlock()
	if first {
		one := uint64(1)
		_, _, _ = syscall.RawSyscall(syscall.SYS_WRITE, uintptr(l.evfd), uintptr(unsafe.Pointer(&one)), 8)
	}
}

// wait yields t's coroutine to its loop until the loop resumes it. Only t's
// own code calls it.
func (t *coTask) wait() { t.yield(struct{}{}) }

// run is the loop, for the life of the process, on a thread of its own.
func (l *coLoop) run() {
	runtime.LockOSThread()
	for {
		n, err := syscall.EpollWait(l.ep, l.events[:], -1) // sleeps: not raw
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			panic(fmt.Sprintf("proxy loop: epoll_wait: %v", err))
		}
		l.round++
		l.resume = l.resume[:0]
		l.reg.mu.RLock()
		for _, ev := range l.events[:n] {
			if int(ev.Fd) == l.evfd {
				continue
			}
			if c := l.reg.lookup(int(ev.Fd)); c != nil {
				if ev.Events&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
					c.r.seen.Store(true)
				}
				if ev.Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
					c.r.hup.Store(true)
				}
				if t := c.task.Load(); t != nil && t.loop == l {
					l.resume = append(l.resume, t)
				} else if h := c.idleHangUp(ev.Events); h != nil {
					l.hungUp = append(l.hungUp, h)
				}
			}
		}
		l.reg.mu.RUnlock()
		runHungUp(&l.hungUp) // they close descriptors: not under the registry's lock
		// Then what was posted: read the eventfd first, so that a post
		// after the swap below writes it again.
		var count uint64
		_, _, _ = syscall.RawSyscall(syscall.SYS_READ, uintptr(l.evfd), uintptr(unsafe.Pointer(&count)), 8)
		l.mu.Lock()
		posted := l.posted
		l.posted, l.spare = l.spare[:0], posted
		l.mu.Unlock()
		for _, t := range posted {
			t.queued.Store(false)
			l.resume = append(l.resume, t)
		}
		for _, t := range l.resume {
			if t.done || t.round == l.round {
				continue
			}
			t.round = l.round
			if t.next == nil {
				fn := t.fn
				t.fn = nil
				t.next, _ = iter.Pull(func(yield func(struct{}) bool) {
					t.yield = yield
					fn(t)
				})
			}
			if _, ok := t.next(); !ok {
				t.done = true
			}
		}
		clear(posted)
	}
}

// post asks t's loop to resume t.
func (t *coTask) post() { t.loop.post(t) }

// bindConn gives c to t (nil: to goroutines) when c is on a poller of the
// proxy's; see pollConn.bind.
func bindConn(c net.Conn, t *coTask) {
	if pc, ok := c.(*pollConn); ok {
		_ = pc.bind(t) // on failure fd stays where it was; wake still finds t
	}
}

// releaseConn takes c from its task as it goes back to a pool: its events
// then wake no one until the next bind, and a hang-up its epoll instance
// sees calls *hungUp (which drops it from the pool if it is still there).
func releaseConn(c net.Conn, hungUp *func()) {
	if pc, ok := c.(*pollConn); ok {
		pc.hungUp.Store(hungUp)
		pc.task.Store(nil)
	}
}

// connLoop is the number of the loop c waits on (1 for the first), 0 when
// it is on none: where the pool keeps it while it is idle.
func connLoop(c net.Conn) int {
	if pc, ok := c.(*pollConn); ok {
		return int(pc.loop.Load())
	}
	return 0
}

// taskLoop is the number of t's loop, 0 for a goroutine (t nil).
func taskLoop(t *coTask) int {
	if t == nil {
		return 0
	}
	return t.loop.id
}
