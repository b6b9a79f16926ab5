//go:build linux

package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// A visitor waiting on a slow origin yields its loop: the other visitors
// on every loop are answered meanwhile.
func TestLoopSlowOriginStallsNoOne(t *testing.T) {
	release := make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = io.WriteString(w, "answer "+r.URL.Path)
	}))
	t.Cleanup(origin.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	snap := snapshot(publication.Origin{Name: "a1", Address: origin.URL, State: "healthy"})
	h := newHarnessOn(t, Options{Poller: PollerLoop}, snap, true)
	addr := strings.TrimPrefix(h.url, "http://")
	send := func(path string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: www.example.com\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		return c, bufio.NewReader(c)
	}
	read := func(c net.Conn, br *bufio.Reader, path string) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "answer "+path {
			t.Fatalf("%s: got %q", path, body)
		}
	}
	// Connections go to the loops in turn: as many slow ones as there are
	// loops put one on each.
	n := runtime.GOMAXPROCS(0)
	type conn struct {
		c  net.Conn
		br *bufio.Reader
	}
	var slow []conn
	for range n {
		c, br := send("/slow")
		slow = append(slow, conn{c, br})
	}
	for i := range 3 * n {
		path := "/fast" + string(rune('a'+i))
		c, br := send(path)
		read(c, br, path) // within 5s, while every loop has a slow one waiting
	}
	close(release)
	for _, s := range slow {
		read(s.c, s.br, "/slow")
	}
}

// On a loop, an EOF that came with the last bytes is read at once: after a
// short read the loop waits for an event, and none follows that FIN.
func TestLoopReadsEOFThatCameWithTheLastBytes(t *testing.T) {
	l, err := nextLoop(0)
	if err != nil {
		t.Skip(err)
	}
	for i := range 20 {
		pc, client := pollPair(t)
		waiting := make(chan struct{})
		got := make(chan string, 1)
		l.start(func(task *coTask) {
			bindConn(pc, task)
			buf := make([]byte, 64)
			close(waiting)
			n, err := pc.Read(buf) // parks until the bytes and the FIN come
			if err != nil {
				got <- err.Error()
				return
			}
			_, err = pc.Read(buf) // must be the EOF, not a wait
			got <- fmt.Sprintf("%s then %v", buf[:n], err)
		})
		<-waiting
		_, _ = client.Write([]byte("last"))
		_ = client.Close()
		select {
		case s := <-got:
			if s != "last then EOF" {
				t.Fatalf("round %d: %s, want %q", i, s, "last then EOF")
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the EOF was not read: the read waits for an event that will not come", i)
		}
	}
}

// Each loop keeps its own idle origin connections: two visitors on two
// loops, taking turns, are each served over an origin connection of their
// own, which never moves between the loops' epoll instances. (With one
// pool for all, both took the one idle connection, and it moved at every
// turn.)
func TestLoopKeepsItsOwnOriginConnections(t *testing.T) {
	if _, err := nextLoop(0); err != nil {
		t.Fatal(err)
	}
	if len(loops) < 2 {
		t.Skipf("needs two event loops, the process has %d", len(loops))
	}
	var mu sync.Mutex
	served := map[string]map[string]bool{} // origin connection -> visitors
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if served[r.RemoteAddr] == nil {
			served[r.RemoteAddr] = map[string]bool{}
		}
		served[r.RemoteAddr][r.URL.Path] = true
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(origin.Close)
	snap := snapshot(publication.Origin{Name: "a1", Address: origin.URL, State: "healthy"})
	h := newHarnessOn(t, Options{Poller: PollerLoop}, snap, true)
	addr := strings.TrimPrefix(h.url, "http://")
	type visitor struct {
		c  net.Conn
		br *bufio.Reader
	}
	// Accepted in turn, so on two loops.
	var vs []visitor
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		vs = append(vs, visitor{c, bufio.NewReader(c)})
	}
	for i := range 40 {
		v, path := vs[i%2], fmt.Sprintf("/v%d", i%2)
		_ = v.c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(v.c, "GET "+path+" HTTP/1.1\r\nHost: www.example.com\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(v.br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(served) != 2 {
		t.Errorf("%d origin connections, want 2 (one a loop): %v", len(served), served)
	}
	for conn, paths := range served {
		if len(paths) != 1 {
			t.Errorf("origin connection %s served visitors on both loops: %v", conn, paths)
		}
	}
}

// An idle origin connection whose origin hangs up (a keep-alive timeout
// shorter than ours) is closed and leaves the pool as soon as its epoll
// instance says so, without waiting for a request to find out: on a loop
// and on the FIFO poller alike.
func TestIdleOriginHangUpIsDropped(t *testing.T) {
	for _, poller := range []string{PollerLoop, PollerFIFO} {
		t.Run(poller, func(t *testing.T) {
			origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "ok")
			}))
			origin.Config.IdleTimeout = 50 * time.Millisecond
			origin.Start()
			t.Cleanup(origin.Close)
			snap := snapshot(publication.Origin{Name: "a1", Address: origin.URL, State: "healthy"})
			h := newHarnessOn(t, Options{Poller: poller}, snap, true)
			get := func() {
				t.Helper()
				if code := h.get(t, "/"); code != http.StatusOK {
					t.Fatalf("status %d", code)
				}
			}
			get()
			up := h.p.state.Load().sites["www.example.com"].pools[origin.Listener.Addr().String()]
			idle := func() []*upConn {
				up.mu.Lock()
				defer up.mu.Unlock()
				var out []*upConn
				for _, s := range up.idle {
					out = append(out, s...)
				}
				return out
			}
			kept := idle()
			if len(kept) != 1 {
				t.Fatalf("%d idle origin connections after a request, want 1", len(kept))
			}
			pc, ok := kept[0].c.(*pollConn)
			if !ok {
				t.Fatalf("the origin connection is a %T, not on a poller of the proxy's", kept[0].c)
			}
			deadline := time.Now().Add(5 * time.Second)
			for len(idle()) != 0 || !pc.closed() {
				if time.Now().After(deadline) {
					t.Fatalf("5s after the origin's 50ms idle timeout: %d idle, closed %v", len(idle()), pc.closed())
				}
				time.Sleep(5 * time.Millisecond)
			}
			if up.nidle != 0 {
				t.Errorf("nidle %d, want 0", up.nidle)
			}
			get() // a new connection serves the next request
		})
	}
}
