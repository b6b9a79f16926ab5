//go:build linux

package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// pollPair is a loopback TCP connection whose server side is on the FIFO
// poller (as the proxy's are) and whose client side is a plain net.Conn.
func pollPair(t *testing.T) (*pollConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	moved, err := onFIFOPoller(server)
	if err != nil {
		t.Fatal(err)
	}
	pc, ok := moved.(*pollConn)
	if !ok {
		t.Fatalf("the connection stayed on Go's poller: %T", moved)
	}
	t.Cleanup(func() { pc.Close() })
	return pc, client
}

func TestPollConnReadWrite(t *testing.T) {
	pc, client := pollPair(t)
	if pc.RemoteAddr().String() != client.LocalAddr().String() || pc.LocalAddr().String() != client.RemoteAddr().String() {
		t.Errorf("addresses %v -> %v, want %v -> %v", pc.RemoteAddr(), pc.LocalAddr(), client.LocalAddr(), client.RemoteAddr())
	}
	// Both ways at once, more than the socket buffers hold, so that reads
	// and writes wait on the poller.
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	var wg sync.WaitGroup
	var echoed []byte
	wg.Go(func() {
		if _, err := pc.Write(want); err != nil {
			t.Errorf("write: %v", err)
		}
	})
	wg.Go(func() {
		got, err := io.ReadAll(io.LimitReader(pc, int64(len(want))))
		if err != nil {
			t.Errorf("read: %v", err)
		}
		echoed = got
	})
	wg.Go(func() {
		if _, err := client.Write(want); err != nil {
			t.Errorf("client write: %v", err)
		}
	})
	got := make([]byte, len(want))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatalf("client read: %v", err)
	}
	wg.Wait()
	if !bytes.Equal(got, want) || !bytes.Equal(echoed, want) {
		t.Fatalf("data changed on the way: %d and %d bytes of %d", len(got), len(echoed), len(want))
	}
}

func TestPollConnDeadlines(t *testing.T) {
	t.Run("a read waits until its deadline", func(t *testing.T) {
		pc, _ := pollPair(t)
		start := time.Now()
		_ = pc.SetReadDeadline(start.Add(50 * time.Millisecond))
		_, err := pc.Read(make([]byte, 1))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read: %v, want a deadline error", err)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("%v is no net.Error timeout", err)
		}
		if waited := time.Since(start); waited < 50*time.Millisecond {
			t.Errorf("returned after %v, before its deadline", waited)
		}
		// A deadline cleared lets the next read through.
		_ = pc.SetReadDeadline(time.Time{})
	})
	t.Run("a past deadline set by another goroutine ends a blocked read", func(t *testing.T) {
		// net/http ends its background read this way (abortPendingRead).
		pc, _ := pollPair(t)
		done := make(chan error, 1)
		go func() {
			_, err := pc.Read(make([]byte, 1))
			done <- err
		}()
		time.Sleep(10 * time.Millisecond) // let it park; it must end either way
		_ = pc.SetReadDeadline(time.Unix(1, 0))
		select {
		case err := <-done:
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("read: %v, want a deadline error", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the read stayed blocked past its deadline")
		}
	})
	t.Run("a later deadline replaces an earlier one", func(t *testing.T) {
		pc, client := pollPair(t)
		_ = pc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_ = pc.SetReadDeadline(time.Now().Add(time.Hour))
		go func() {
			time.Sleep(60 * time.Millisecond)
			_, _ = client.Write([]byte("x"))
		}()
		if _, err := pc.Read(make([]byte, 1)); err != nil {
			t.Fatalf("read: %v; the first deadline still held", err)
		}
	})
	t.Run("a write to a visitor that reads nothing ends at its deadline", func(t *testing.T) {
		pc, _ := pollPair(t)
		_ = pc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := pc.Write(make([]byte, 64<<20))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write: %v, want a deadline error", err)
		}
		if n <= 0 || n >= 64<<20 {
			t.Errorf("wrote %d bytes, want some of them", n)
		}
	})
}

func TestPollConnEnds(t *testing.T) {
	t.Run("the peer closes: EOF", func(t *testing.T) {
		pc, client := pollPair(t)
		_, _ = client.Write([]byte("last"))
		client.Close()
		got, err := io.ReadAll(pc)
		if err != nil || string(got) != "last" {
			t.Fatalf("read %q, %v; want \"last\" then EOF", got, err)
		}
	})
	t.Run("the peer resets: an error, not EOF", func(t *testing.T) {
		pc, client := pollPair(t)
		_ = client.(*net.TCPConn).SetLinger(0)
		client.Close()
		_, err := io.ReadAll(pc)
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read: %v, want ECONNRESET", err)
		}
	})
	t.Run("Close ends a blocked read and closes the socket", func(t *testing.T) {
		pc, client := pollPair(t)
		done := make(chan error, 1)
		go func() {
			_, err := pc.Read(make([]byte, 1))
			done <- err
		}()
		time.Sleep(10 * time.Millisecond) // let it park; it must end either way
		if err := pc.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("read: %v, want net.ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close left the read blocked")
		}
		_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := client.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("the peer read %d, %v; want EOF", n, err)
		}
		if err := pc.Close(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("a second Close: %v, want net.ErrClosed", err)
		}
		if _, err := pc.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Errorf("a write after Close: %v, want net.ErrClosed", err)
		}
	})
	t.Run("CloseWrite sends a FIN and keeps reading", func(t *testing.T) {
		pc, client := pollPair(t)
		_, _ = pc.Write([]byte("answer"))
		if err := pc.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(client)
		if err != nil || string(got) != "answer" {
			t.Fatalf("the peer read %q, %v", got, err)
		}
		_, _ = client.Write([]byte("more"))
		buf := make([]byte, 4)
		if _, err := io.ReadFull(pc, buf); err != nil || string(buf) != "more" {
			t.Fatalf("read after CloseWrite: %q, %v", buf, err)
		}
	})
	t.Run("a closed descriptor's number reused by a new connection", func(t *testing.T) {
		// The table is indexed by descriptor: the new connection must get
		// its own events, none of the old one's.
		for range 20 {
			pc, client := pollPair(t)
			_, _ = client.Write([]byte("ping"))
			buf := make([]byte, 4)
			if _, err := io.ReadFull(pc, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("read %q, %v", buf, err)
			}
			pc.Close()
		}
	})
}

// The reason for the poller: connections are served in the order they
// became ready. With one P, the test writes to 64 connections in turn
// before any reader can run; their readers then run, and record their
// order.
func TestPollConnWakesInOrder(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	const n = 64
	conns := make([]*pollConn, n)
	clients := make([]net.Conn, n)
	for i := range n {
		conns[i], clients[i] = pollPair(t)
	}
	var mu sync.Mutex
	var order []int
	var parked, done sync.WaitGroup
	for i, pc := range conns {
		parked.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			parked.Done()
			if _, err := pc.Read(make([]byte, 1)); err != nil {
				t.Error(err)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}()
	}
	parked.Wait()
	runtime.Gosched() // the last reader parks in Read
	for _, c := range clients {
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	done.Wait()
	// Kept in order: all but the last woken, which Go runs first. Under the
	// race detector, whose scheduler shuffles on purpose, most of them
	// (Go's own poller keeps few in order: it serves a batch in reverse).
	want := n - 2
	if raceEnabled {
		want = n / 2
	}
	if got := longestIncreasing(order); got < want {
		t.Fatalf("readers ran in the order %v: %d of %d in order, want at least %d", order, got, n, want)
	}
}

// longestIncreasing is the length of the longest increasing subsequence of
// s: how many ran in order, the others aside.
func longestIncreasing(s []int) int {
	var tails []int
	for _, v := range s {
		i, _ := slices.BinarySearch(tails, v)
		if i == len(tails) {
			tails = append(tails, v)
		} else {
			tails[i] = v
		}
	}
	return len(tails)
}

// The server puts its visitor connections and its origin connections on
// the proxy's pollers (a loop's epoll instance, bound to the visitor's
// task, with PollerLoop; the FIFO poller's with PollerFIFO), and leaves them
// on Go's with PollerGo.
func TestServerUsesFIFOPoller(t *testing.T) {
	origin := newEchoOrigin(t)
	snap := snapshot(publication.Origin{Name: "a1", Address: origin.srv.URL, State: "healthy"})
	for _, poller := range []string{PollerLoop, PollerFIFO, PollerGo} {
		t.Run(poller, func(t *testing.T) {
			h := newHarnessOn(t, Options{Poller: poller}, snap, true)
			c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: www.example.com\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			h.server.mu.Lock()
			var visitors []net.Conn
			for rc := range h.server.conns {
				visitors = append(visitors, rc.c)
			}
			h.server.mu.Unlock()
			up := h.p.state.Load().sites["www.example.com"].pools[origin.srv.Listener.Addr().String()]
			up.mu.Lock()
			var idle []net.Conn
			for _, s := range up.idle {
				for _, uc := range s {
					idle = append(idle, uc.c)
				}
			}
			up.mu.Unlock()
			if len(visitors) != 1 || len(idle) != 1 {
				t.Fatalf("%d visitor and %d idle origin connections, want 1 each", len(visitors), len(idle))
			}
			visitor, origin := visitors[0], idle[0]
			if poller == PollerGo {
				for _, conn := range []net.Conn{visitor, origin} {
					if _, ours := conn.(*pollConn); ours {
						t.Errorf("a %T with Poller %q", conn, poller)
					}
				}
				return
			}
			v, ok1 := visitor.(*pollConn)
			o, ok2 := origin.(*pollConn)
			if !ok1 || !ok2 {
				t.Fatalf("%T and %T with Poller %q, want pollConns", visitor, origin, poller)
			}
			task := v.task.Load()
			if (task != nil) != (poller == PollerLoop) {
				t.Errorf("visitor task %v with Poller %q", task, poller)
			}
			vep, oep := int(v.ep.Load()), int(o.ep.Load())
			if poller == PollerLoop && (vep != task.loop.ep || oep != task.loop.ep) {
				t.Errorf("visitor on epoll %d, origin on %d, want both on the task's loop's %d", vep, oep, task.loop.ep)
			}
			if poller == PollerFIFO && (vep != v.p.epfd || oep != v.p.epfd) {
				t.Errorf("visitor on epoll %d, origin on %d, want both on the FIFO poller's %d", vep, oep, v.p.epfd)
			}
			if o.task.Load() != nil {
				t.Error("an idle origin connection still has a task")
			}
		})
	}
}

// Reads, writes, deadlines and Close racing on many connections at once
// leave no descriptor open and nothing blocked: each pollConn closes its
// descriptor exactly once, after its last call.
func TestPollConnCloseRaces(t *testing.T) {
	openFDs := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd")
		}
		return len(ents)
	}
	if _, err := sharedPoller(); err != nil { // its epoll descriptor stays
		t.Fatal(err)
	}
	before := openFDs()
	const conns = 50
	var wg sync.WaitGroup
	for i := range conns {
		pc, client := pollPair(t)
		wg.Go(func() { // a reader, blocked most of the time
			buf := make([]byte, 512)
			for {
				if _, err := pc.Read(buf); err != nil {
					return
				}
			}
		})
		wg.Go(func() { // a writer the peer never reads: it blocks when full
			buf := make([]byte, 64<<10)
			for {
				if _, err := pc.Write(buf); err != nil {
					return
				}
			}
		})
		wg.Go(func() { // the peer sends a little, then deadlines and Close race
			_, _ = client.Write([]byte("hello"))
			if i%3 == 0 {
				_ = pc.SetDeadline(time.Now().Add(time.Duration(i) * time.Millisecond))
			}
			time.Sleep(time.Duration(i%7) * time.Millisecond)
			_ = pc.Close()
			_ = pc.Close()
			client.Close()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a read or write stayed blocked after Close")
	}
	// pollPair's cleanups have not run yet: the clients are closed above,
	// the pollConns too; only the listener sockets of pollPair are gone.
	if after := openFDs(); after > before {
		t.Fatalf("%d descriptors open after, %d before: a pollConn kept its descriptor", after, before)
	}
}
