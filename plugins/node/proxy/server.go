package proxy

// The visitor side of the raw path: a listener's connections are read by
// their own goroutine, which parses each HTTP/1.1 request head in place and
// forwards it (raw.go). A connection whose request the raw path does not
// take is handed, from that request on, to a net/http.Server running
// ServeHTTP: the bytes already read go with it.
//
// Profiled on loopback (issue 19), vigil-node behind net/http.Server spent
// about half of its CPU per request in the server itself rather than in
// forwarding: a goroutine and a context per request for the background read
// that detects a visitor going away, the Request and its Header map, the
// response's header map and its chunk writer. HAProxy and nginx do none of
// that per request; the raw path does not either.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of NewServer, as vigil-node's -proxy-listen had them on
// net/http.Server.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
)

const (
	// visitorReadBuffer holds one request head; a larger head (or a
	// pipelined run that fills it) goes to net/http, which takes heads up
	// to 1 MiB. HAProxy's default buffer (tune.bufsize) is 16 KiB; net/http
	// reads and writes through 4 KiB.
	visitorReadBuffer  = 8 << 10
	visitorWriteBuffer = 4 << 10
	// keepBuffer: a head or body buffer larger than this is dropped after
	// its request, so that an idle connection keeps no more.
	keepBuffer = 4 << 10
)

// Server serves a Proxy on listeners, through the raw path for the HTTP/1.1
// requests it takes and net/http.Server for everything else (HTTP/1.0, a
// chunked or streamed request body, Expect, an upgrade, a Host that names
// no site, a site with https origins, a malformed head). The two paths send
// the origin the same request and pass its answer on the same way; see the
// package documentation.
type Server struct {
	p                 *Proxy
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration

	http    *http.Server
	handoff *handoffListener

	mu      sync.Mutex
	lns     []net.Listener
	conns   map[*rawConn]struct{}
	closed  bool
	started bool
	wg      sync.WaitGroup

	// closing is set first thing in Close: a request then makes no new
	// attempt (Close stores closing, then reads each connection's up; a
	// request stores up, then reads closing: one of them sees the other).
	closing   atomic.Bool
	handedOff atomic.Int64 // connections handed to net/http
	panics    atomic.Int64 // connections ended by a panic (a bug): tests want none
}

// NewServer returns a server for p. A request head must arrive within
// readHeaderTimeout once its first byte has, and a kept-alive connection is
// closed after idleTimeout without a request (zero or less takes the
// defaults).
func (p *Proxy) NewServer(readHeaderTimeout, idleTimeout time.Duration) *Server {
	if readHeaderTimeout <= 0 {
		readHeaderTimeout = DefaultReadHeaderTimeout
	}
	if idleTimeout <= 0 {
		idleTimeout = DefaultIdleTimeout
	}
	return &Server{
		p: p, readHeaderTimeout: readHeaderTimeout, idleTimeout: idleTimeout,
		http:    &http.Server{Handler: p, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout},
		handoff: newHandoffListener(),
		conns:   map[*rawConn]struct{}{},
	}
}

// Serve accepts connections on ln until Close, and then returns
// http.ErrServerClosed. Any other error is the listener's.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.lns = append(s.lns, ln)
	if !s.started {
		s.started = true
		s.wg.Go(func() { _ = s.http.Serve(s.handoff) })
	}
	s.mu.Unlock()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return http.ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors, for one: wait as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.p.opts.Log.Error("proxy listener: accept failed; retrying", "error", err, "retry_in", backoff.String())
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if s.p.opts.Poller != PollerGo {
			if c, err = onFIFOPoller(c); err != nil {
				s.p.opts.Log.Warn("proxy listener: a visitor connection was lost moving it to the poller", "error", err)
				continue
			}
		}
		rc := s.newConn(c)
		if rc == nil {
			_ = c.Close()
			return http.ErrServerClosed
		}
		if s.p.opts.Poller == PollerLoop {
			if l, err := nextLoop(s.p.opts.Loops); err == nil {
				s.wg.Add(1)
				l.start(func(t *coTask) {
					defer s.wg.Done()
					rc.task = t
					bindConn(rc.c, t)
					rc.serve()
				})
				continue
			}
		}
		s.wg.Go(rc.serve)
	}
}

// Close closes the listeners and every connection, the raw path's (with the
// origin connection each is using) and those handed to net/http, and waits
// for the raw path's goroutines (as net/http.Server.Close, not for the
// handlers of handed-off connections).
func (s *Server) Close() error {
	s.closing.Store(true)
	s.mu.Lock()
	s.closed = true
	lns := s.lns
	conns := make([]*rawConn, 0, len(s.conns))
	for rc := range s.conns {
		conns = append(conns, rc)
	}
	s.mu.Unlock()
	var errs []error
	for _, ln := range lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, rc := range conns {
		_ = rc.c.Close()
		if uc := rc.up.Load(); uc != nil {
			_ = uc.c.Close() // a goroutine may be waiting on the origin: a stream
		}
	}
	s.handoff.Close()
	if err := s.http.Close(); err != nil {
		errs = append(errs, err)
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// newConn tracks a new connection, or returns nil once the server is closed.
func (s *Server) newConn(c net.Conn) *rawConn {
	rc := &rawConn{s: s, p: s.p, c: c, br: bufio.NewReaderSize(c, visitorReadBuffer), bw: bufio.NewWriterSize(c, visitorWriteBuffer)}
	if ip, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		rc.ip = ip
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.conns[rc] = struct{}{}
	return rc
}

func (s *Server) forget(rc *rawConn) {
	s.mu.Lock()
	delete(s.conns, rc)
	s.mu.Unlock()
}

// handoffListener is the listener of the net/http.Server: its connections
// are those the raw path hands over.
type handoffListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newHandoffListener() *handoffListener {
	return &handoffListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return handoffAddr{} }

// give hands c to the net/http.Server, or closes it once the server is
// closed.
func (l *handoffListener) give(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		_ = c.Close()
	}
}

type handoffAddr struct{}

func (handoffAddr) Network() string { return "tcp" }
func (handoffAddr) String() string  { return "vigil-node proxy (handed-off connections)" }

// handedConn is a visitor connection handed to net/http: what the raw path
// had read and not used is read first.
type handedConn struct {
	net.Conn
	pre []byte
}

// CloseWrite lets net/http half-close the connection before it closes it,
// so that a reset does not wipe the last answer.
func (c *handedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *handedConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// rawConn is one visitor connection on the raw path.
type rawConn struct {
	s  *Server
	p  *Proxy
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
	ip string // the visitor's address for X-Forwarded-For ("" when it has none)
	// deadline is the read deadline set on c: moved only when it would end
	// too early, so that most requests set none.
	deadline time.Time
	head     []byte // a copy of the current request head
	req      rawRequest
	body     []byte // the current request's body (reused)
	// respNamed are the headers the answer's Connection names: slices of
	// the origin connection's buffer, valid until its head is discarded.
	respNamed [][]byte
	// up is the origin connection the current request uses, for Close.
	up atomic.Pointer[upConn]
	// task is the connection's coroutine on an event loop (loop_linux.go),
	// nil when it runs on a goroutine of its own.
	task *coTask
}

// serve runs the connection's requests until it closes, times out, asks to
// close, or is handed off.
func (rc *rawConn) serve() {
	handed := false
	defer func() {
		if v := recover(); v != nil {
			rc.s.panics.Add(1)
			rc.p.opts.Log.Error("proxy: a visitor connection failed; it is closed", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
		rc.s.forget(rc)
		if !handed {
			_ = rc.c.Close()
		}
	}()
	for {
		n, err := rc.readHead()
		if err != nil {
			return // closed, timed out or reset: nothing to answer
		}
		keep, take := rc.serveRequest(n)
		if !take {
			handed = true
			rc.handOff()
			return
		}
		if !keep {
			return
		}
	}
}

// readHead waits for a whole request head in br and returns its length, up
// to and with the blank line. It returns 0 (and no error) for a head the raw
// path leaves to net/http: too large for the buffer, or lines not ended by
// CRLF.
func (rc *rawConn) readHead() (int, error) {
	waiting := false
	for {
		if rc.br.Buffered() == 0 {
			// Idle between requests: the idle timeout, moved only when
			// it would end within 90 % of it.
			now := time.Now()
			if rc.deadline.Before(now.Add(rc.s.idleTimeout - rc.s.idleTimeout/10)) {
				rc.deadline = now.Add(rc.s.idleTimeout)
				if err := rc.c.SetReadDeadline(rc.deadline); err != nil {
					return 0, err
				}
			}
			if _, err := rc.br.Peek(1); err != nil {
				return 0, err
			}
		}
		buf, _ := rc.br.Peek(rc.br.Buffered())
		end, ok := headEnd(buf)
		if end > 0 {
			if !ok {
				return 0, nil
			}
			return end, nil
		}
		if len(buf) >= rc.br.Size() {
			return 0, nil
		}
		if !waiting {
			// Part of a head came: the rest must within the header
			// timeout, as net/http.Server's ReadHeaderTimeout.
			waiting = true
			rc.deadline = time.Now().Add(rc.s.readHeaderTimeout)
			if err := rc.c.SetReadDeadline(rc.deadline); err != nil {
				return 0, err
			}
		}
		if _, err := rc.br.Peek(len(buf) + 1); err != nil {
			return 0, err
		}
	}
}

// headEnd returns the length of the request head at the start of buf (0
// when buf holds no whole head) and whether every line of it ends with
// CRLF and it starts with a request line (not a blank line).
func headEnd(buf []byte) (int, bool) {
	ok := true
	for i := 0; ; {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			return 0, ok
		}
		if j == 0 || buf[i+j-1] != '\r' {
			ok = false
		}
		if j == 0 || (j == 1 && buf[i] == '\r') {
			return i + j + 1, ok && i > 0
		}
		i += j + 1
	}
}

// handOff gives the connection, and what was read of it, to net/http.
func (rc *rawConn) handOff() {
	_ = rc.bw.Flush()
	var pre []byte
	if n := rc.br.Buffered(); n > 0 {
		b, _ := rc.br.Peek(n)
		pre = append([]byte(nil), b...)
	}
	_ = rc.c.SetReadDeadline(time.Time{})
	rc.s.forget(rc)
	rc.s.handedOff.Add(1)
	hc := &handedConn{Conn: rc.c, pre: pre}
	if rc.task != nil {
		// net/http's goroutines take it from here; the loop must not wait
		// for its Accept.
		bindConn(rc.c, nil)
		go rc.s.handoff.give(hc)
		return
	}
	rc.s.handoff.give(hc)
}
