package proxy

// The fast path: plain HTTP/1.1 to http origins, written and read by the
// request's own goroutine over pooled keep-alive connections.
//
// Profiled on loopback (issue 19), httputil.ReverseProxy over http.Transport
// spent most of vigil-node's time per request outside the proxy's own logic:
// two goroutine hand-offs per request (the transport's write and read
// loops), the request cloned twice (ReverseProxy, then each attempt), a 32
// KiB copy buffer allocated per request, a global lock in the failure
// tracker and a label hash per metric. The fast path writes exactly the
// request the old path wrote (same Host, headers less the hop-by-hop ones,
// X-Forwarded-For/-Host/-Proto, no User-Agent added, no Accept-Encoding
// added: the old transport's transparent gzip is off) and passes the
// response on as ReverseProxy did (hop-by-hop headers removed, 1xx
// forwarded, trailers, immediate flushes for streams). The attempts, the
// passive tracking and the retries are the same code as the old path's.
//
// What it does not handle goes the old way, unchanged: https origins,
// protocol upgrades, Expect, request trailers, streamed request bodies (a
// body too large to replay, or one of a method never retried), a Host that
// needs IDNA or has a zone, and a query string ReverseProxy would re-encode.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	maxIdlePerOrigin = 256
	idleConnTimeout  = 90 * time.Second
	max1xxResponses  = 5 // as http.Transport
)

var (
	aLongTimeAgo = time.Unix(1, 0)
	// queryReencoded: with a non-default urlmaxqueryparams, ReverseProxy
	// re-encodes every query; the old path does that.
	queryReencoded = strings.Contains(os.Getenv("GODEBUG"), "urlmaxqueryparams")
)

// copyBuffers is the pool of 32 KiB body copy buffers, shared by both paths
// (ReverseProxy.BufferPool).
type copyBuffers struct{}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (copyBuffers) Get() []byte  { return *(bufPool.Get().(*[]byte)) }
func (copyBuffers) Put(b []byte) { bufPool.Put(&b) }

// upstream is the pool of idle keep-alive connections to one origin address.
type upstream struct {
	addr   string
	dialer *net.Dialer
	fifo   bool // its connections go on the FIFO poller

	mu sync.Mutex
	// idle are the idle connections by where they wait: idle[0] on no
	// event loop (goroutines use those), idle[i] on loop i; each most
	// recently used last. nidle counts them all.
	idle   [][]*upConn
	nidle  int
	closed bool
}

type upConn struct {
	c      net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
	reused bool
	stop   func() bool // ends the watch on the visitor's context (nil: none)
	// raw, peek, peekBuf and peekClean are idleClean's, made at its
	// first peek.
	raw       syscall.RawConn
	peek      func(fd uintptr)
	peekBuf   [1]byte
	peekClean bool
	// deadline is the read deadline set on c (zero: none). It is moved
	// only when it would end within ResponseTimeout, so that most
	// requests set no deadline at all.
	deadline time.Time
	// hungUp is dropHungUp for this connection, made at its first put.
	hungUp func()
}

// pool returns the fast path's pool for u's address, the previous
// publication's when it had one.
func (p *Proxy) pool(s, prev *site, u *url.URL) *upstream {
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	if s.pools == nil {
		s.pools = map[string]*upstream{}
	}
	if up := s.pools[addr]; up != nil {
		return up
	}
	var up *upstream
	if prev != nil {
		up = prev.pools[addr]
	}
	if up == nil {
		up = &upstream{addr: addr, dialer: &net.Dialer{Timeout: p.opts.ConnectTimeout, KeepAlive: 30 * time.Second}, fifo: p.opts.Poller != PollerGo}
	}
	s.pools[addr] = up
	return up
}

// stealAfter is how long a connection waits idle on one event loop before
// a task of another loop may take it. A loop's tasks take their loop's own
// connections first, newest first, and dial when it has none: a
// connection that moves loops costs two epoll_ctl and its next event a
// lock, while one that stays never does (at saturation 17% of the takes
// moved one; without them throughput rose 7% and the p99 fell 6%). A
// connection idle that long is spare where it waits, so a quiet site
// still needs one connection to an origin, not one a loop.
const stealAfter = time.Second

// get returns an idle connection, or a new one, for a request on task t
// (nil: on a goroutine), bound to it.
func (u *upstream) get(ctx context.Context, t *coTask) (*upConn, error) {
	now := time.Now()
	u.mu.Lock()
	for {
		c := u.takeLocked(taskLoop(t), now)
		if c == nil {
			break
		}
		u.mu.Unlock()
		if idleClean(c) {
			c.reused = true
			bindConn(c.c, t)
			return c, nil
		}
		_ = c.c.Close()
		u.mu.Lock()
	}
	u.mu.Unlock()
	return u.dialFor(ctx, t)
}

// takeLocked takes an idle connection for a request on loop own (0: on a
// goroutine): its own newest, else another's oldest that has waited
// stealAfter. Those that have waited idleConnTimeout are closed on the way.
// nil: dial. Called with u.mu held.
func (u *upstream) takeLocked(own int, now time.Time) *upConn {
	if own < len(u.idle) {
		s := u.idle[own]
		for n := len(s); n > 0; n = len(s) {
			c := s[n-1]
			s[n-1] = nil
			s = s[:n-1]
			u.nidle--
			if now.Sub(c.idleAt) < idleConnTimeout {
				u.idle[own] = s
				return c
			}
			_ = c.c.Close()
		}
		u.idle[own] = s
	}
	for i, s := range u.idle {
		for i != own && len(s) > 0 && now.Sub(s[0].idleAt) >= stealAfter {
			c := s[0]
			copy(s, s[1:])
			s[len(s)-1] = nil
			s = s[:len(s)-1]
			u.idle[i] = s
			u.nidle--
			if now.Sub(c.idleAt) < idleConnTimeout {
				return c
			}
			_ = c.c.Close()
		}
	}
	return nil
}

// dialFor is dial for task t: a task's loop must not wait for a connect,
// so the dial runs on a goroutine while t yields.
func (u *upstream) dialFor(ctx context.Context, t *coTask) (*upConn, error) {
	if t == nil {
		return u.dial(ctx)
	}
	var c *upConn
	var err error
	var done atomic.Bool
	go func() {
		c, err = u.dial(ctx)
		done.Store(true)
		t.post()
	}()
	for !done.Load() {
		t.wait()
	}
	if err == nil {
		bindConn(c.c, t)
	}
	return c, err
}

func (u *upstream) dial(ctx context.Context) (*upConn, error) {
	c, err := u.dialer.DialContext(ctx, "tcp", u.addr)
	if err != nil {
		return nil, err
	}
	if u.fifo {
		if c, err = onFIFOPoller(c); err != nil {
			return nil, err
		}
	}
	return &upConn{c: c, br: bufio.NewReaderSize(c, 4<<10), bw: bufio.NewWriterSize(c, 4<<10)}, nil
}

func (u *upstream) put(c *upConn) {
	if c.br.Buffered() > 0 {
		// Bytes past the answer's end: never the next answer's.
		_ = c.c.Close()
		return
	}
	if c.hungUp == nil {
		c.hungUp = func() { u.dropHungUp(c) }
	}
	releaseConn(c.c, &c.hungUp)
	c.idleAt = time.Now()
	l := connLoop(c.c)
	u.mu.Lock()
	if !u.closed && u.nidle < maxIdlePerOrigin {
		for len(u.idle) <= l {
			u.idle = append(u.idle, nil)
		}
		u.idle[l] = append(u.idle[l], c)
		u.nidle++
		u.mu.Unlock()
		return
	}
	u.mu.Unlock()
	_ = c.c.Close()
}

// dropHungUp closes c if it is still idle in u. Its epoll instance saw the
// origin hang up (an origin's keep-alive timeout is often shorter than
// ours), so no request may take it, and its descriptor need not wait for
// one to find out. One that a request took meanwhile is left to it: its
// check finds the hang-up.
func (u *upstream) dropHungUp(c *upConn) {
	u.mu.Lock()
	found := false
	for i, s := range u.idle {
		if j := slices.Index(s, c); j >= 0 {
			u.idle[i] = slices.Delete(s, j, j+1)
			u.nidle--
			found = true
			break
		}
	}
	u.mu.Unlock()
	if found {
		_ = c.c.Close()
	}
}

// closeIdle closes the idle connections and keeps no more (the site left
// the publication).
func (u *upstream) closeIdle() {
	u.mu.Lock()
	idle := u.idle
	u.idle, u.nidle, u.closed = nil, 0, true
	u.mu.Unlock()
	for _, s := range idle {
		for _, c := range s {
			_ = c.c.Close()
		}
	}
}

// release ends a response: the connection goes back to the pool when its
// response was read to the end and both sides keep it alive.
func (u *upstream) release(c *upConn, resp *http.Response, reusable bool) {
	watching := true // the raw path watches no context
	if c.stop != nil {
		watching = c.stop()
		c.stop = nil
	}
	u.releaseRaw(c, reusable && watching && !resp.Close)
}

// fastRequest reports whether r can take the fast path.
func fastRequest(r *http.Request) bool {
	h := r.Header
	if len(h["Upgrade"]) > 0 || len(h["Expect"]) > 0 || len(h["Trailer"]) > 0 || r.Trailer != nil {
		return false
	}
	for _, v := range h["Connection"] {
		if strings.Contains(strings.ToLower(v), "upgrade") {
			return false
		}
	}
	for i := 0; i < len(r.Host); i++ {
		if c := r.Host[i]; c <= ' ' || c >= 0x7f || c == '%' {
			return false
		}
	}
	return r.URL.Opaque == "" && cleanQuery(r.URL.RawQuery)
}

// cleanQuery reports whether ReverseProxy would pass q on unchanged.
func cleanQuery(q string) bool {
	if q == "" {
		return true
	}
	if queryReencoded || strings.Count(q, "&") >= 1000 {
		return false
	}
	for i := 0; i < len(q); {
		switch q[i] {
		case ';':
			return false
		case '%':
			if i+2 >= len(q) || !ishex(q[i+1]) || !ishex(q[i+2]) {
				return false
			}
			i += 3
		default:
			i++
		}
	}
	return true
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// serveFast serves r on the fast path and reports true, or reports false
// (having written nothing) for the old path to serve it.
func (p *Proxy) serveFast(w *recorder, r *http.Request, s *site, start time.Time, from bool) bool {
	if !s.fast || !fastRequest(r) {
		return false
	}
	retryable := idempotent(r.Method)
	var body []byte
	hasBody := r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
	if hasBody {
		if !retryable {
			return false // streamed, as before
		}
		var rest io.ReadCloser
		var replayable bool
		var err error
		body, rest, replayable, err = buffer(r.Body, r.ContentLength, p.opts.MaxReplayBody)
		if err != nil {
			p.failSite(w, r, s.pub.Name, errors.New("reading the request body: "+err.Error()))
			return true
		}
		if !replayable {
			r.Body = rest // the old path streams it, unretried
			return false
		}
		if body == nil {
			body = []byte{}
		}
	}
	try := func(o *origin) (answer, *upConn, error) {
		resp, uc, err := p.attempt(w, r, o, body)
		if resp == nil {
			return answer{}, uc, err
		}
		_, retryAfter := resp.Header["Retry-After"]
		return answer{resp: resp, status: resp.StatusCode, retryAfter: retryAfter}, uc, err
	}
	a, uc, o, err := p.tries(s, from, retryable, start, try, func(error) bool { return r.Context().Err() != nil })
	resp := a.resp
	if err != nil {
		p.failSite(w, r, s.pub.Name, err)
		return true
	}
	p.respond(w, r, o.up, uc, resp)
	return true
}

// attempt sends r to o and reads the response's header. A kept-alive
// connection the origin closed meanwhile is replaced by a new one, once,
// for a request http.Transport would have replayed.
func (p *Proxy) attempt(w http.ResponseWriter, r *http.Request, o *origin, body []byte) (*http.Response, *upConn, error) {
	ctx := r.Context()
	for fresh := false; ; fresh = true {
		var uc *upConn
		var err error
		if fresh {
			uc, err = o.up.dial(ctx)
		} else {
			uc, err = o.up.get(ctx, nil)
		}
		if err != nil {
			return nil, nil, err
		}
		conn := uc.c
		uc.stop = context.AfterFunc(ctx, func() { _ = conn.SetDeadline(aLongTimeAgo) })
		resp, err := p.roundTrip(w, uc, r, body)
		if err == nil {
			return resp, uc, nil
		}
		uc.stop()
		_ = uc.c.Close()
		if fresh || !uc.reused || ctx.Err() != nil || !replayable(r, body) || !stale(err) {
			return nil, nil, err
		}
	}
}

// replayable is http.Transport's rule for resending a request on a new
// connection after a kept-alive one failed.
func replayable(r *http.Request, body []byte) bool {
	if body != nil {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return len(r.Header["Idempotency-Key"]) > 0 || len(r.Header["X-Idempotency-Key"]) > 0
}

// stale reports whether err is a kept-alive connection closed by its peer.
func stale(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (p *Proxy) roundTrip(w http.ResponseWriter, uc *upConn, r *http.Request, body []byte) (*http.Response, error) {
	writeHead(uc.bw, r, body)
	if len(body) > 0 {
		_, _ = uc.bw.Write(body)
	}
	if err := uc.bw.Flush(); err != nil {
		return nil, err
	}
	// The wait for the response header is bounded by ResponseTimeout and
	// at most an eighth more.
	if now := time.Now(); uc.deadline.IsZero() || uc.deadline.Before(now.Add(p.opts.ResponseTimeout)) {
		uc.deadline = now.Add(p.opts.ResponseTimeout + p.opts.ResponseTimeout/8)
		if err := uc.c.SetReadDeadline(uc.deadline); err != nil {
			return nil, err
		}
	}
	for n1xx := 0; ; {
		resp, err := http.ReadResponse(uc.br, r)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() && r.Context().Err() == nil {
				return nil, timeoutError{}
			}
			return nil, err
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return nil, errors.New("the origin switched protocols, which the request did not ask for")
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			if n1xx++; n1xx > max1xxResponses {
				return nil, errors.New("net/http: too many 1xx informational responses")
			}
			h := w.Header()
			copyHeader(h, resp.Header)
			w.WriteHeader(resp.StatusCode)
			clear(h)
			continue
		}
		// A body still to be read is not bounded (as http.Transport's):
		// the deadline goes, unless the body is already buffered.
		if resp.ContentLength < 0 || int64(uc.br.Buffered()) < resp.ContentLength {
			uc.deadline = time.Time{}
			if err := uc.c.SetReadDeadline(time.Time{}); err != nil {
				return nil, err
			}
		}
		if r.Context().Err() != nil {
			_ = uc.c.SetDeadline(aLongTimeAgo)
		}
		return resp, nil
	}
}

// timeoutError is the error of an origin that sent no response header in
// ResponseTimeout, as http.Transport's.
type timeoutError struct{}

func (timeoutError) Error() string   { return "net/http: timeout awaiting response headers" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// reqExcluded are the request headers never copied as they are: written by
// writeHead itself, hop-by-hop, or replaced by the proxy (X-Forwarded-*).
var reqExcluded = map[string]bool{
	"Host": true, "User-Agent": true, "Content-Length": true, "Transfer-Encoding": true, "Trailer": true,
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Upgrade": true,
	"Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true,
}

// writeHead writes the request line and header of r as the old path's
// ReverseProxy and http.Transport did.
func writeHead(bw *bufio.Writer, r *http.Request, body []byte) {
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(r.URL.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(r.Host)
	bw.WriteString("\r\n")
	h := r.Header
	if ua := h["User-Agent"]; len(ua) > 0 && ua[0] != "" {
		line(bw, "User-Agent", ua[0])
	}
	switch {
	case body != nil:
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.Itoa(len(body)))
		bw.WriteString("\r\n")
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		bw.WriteString("Content-Length: 0\r\n")
	}
	var named []string // the headers Connection names: hop-by-hop too
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				named = append(named, http.CanonicalHeaderKey(f))
			}
		}
	}
	for k, vv := range h {
		if reqExcluded[k] || (named != nil && contains(named, k)) {
			continue
		}
		for _, v := range vv {
			line(bw, k, v)
		}
	}
	for _, v := range h["Te"] {
		if tokenIn(v, "trailers") && !contains(named, "Te") {
			bw.WriteString("Te: trailers\r\n")
			break
		}
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		line(bw, "X-Forwarded-For", ip)
	}
	line(bw, "X-Forwarded-Host", r.Host)
	if r.TLS == nil {
		bw.WriteString("X-Forwarded-Proto: http\r\n\r\n")
	} else {
		bw.WriteString("X-Forwarded-Proto: https\r\n\r\n")
	}
}

func line(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	bw.WriteString(strings.TrimSpace(v))
	bw.WriteString("\r\n")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// tokenIn reports whether the comma-separated list v holds token (ASCII
// case-insensitive).
func tokenIn(v, token string) bool {
	for f := range strings.SplitSeq(v, ",") {
		if strings.EqualFold(strings.TrimSpace(f), token) {
			return true
		}
	}
	return false
}

// hopHeaders are the response headers ReverseProxy removes.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = strings.TrimSpace(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, f := range hopHeaders {
		delete(h, f)
	}
}

func copyHeader(dst, src http.Header) {
	for k, vv := range src {
		for _, v := range vv {
			dst.Add(k, v)
		}
	}
}

// respond passes resp on to w as ReverseProxy did, then releases uc.
func (p *Proxy) respond(w http.ResponseWriter, r *http.Request, up *upstream, uc *upConn, resp *http.Response) {
	removeHopByHop(resp.Header)
	dst := w.Header()
	copyHeader(dst, resp.Header)
	announced := len(resp.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		dst.Add("Trailer", strings.Join(keys, ", "))
	}
	w.WriteHeader(resp.StatusCode)
	flush := resp.ContentLength == -1
	if !flush {
		if ct := resp.Header["Content-Type"]; len(ct) > 0 {
			base, _, _ := mime.ParseMediaType(ct[0])
			flush = base == "text/event-stream"
		}
	}
	bp := bufPool.Get().(*[]byte)
	err := copyBody(w, resp.Body, *bp, flush)
	bufPool.Put(bp)
	if err != nil {
		up.release(uc, resp, false)
		if r.Context().Value(http.ServerContextKey) != nil {
			panic(http.ErrAbortHandler) // as ReverseProxy: the visitor sees a cut response
		}
		return
	}
	up.release(uc, resp, true)
	if len(resp.Trailer) > 0 {
		_ = http.NewResponseController(w).Flush()
	}
	if len(resp.Trailer) == announced {
		copyHeader(w.Header(), resp.Trailer)
		return
	}
	for k, vv := range resp.Trailer {
		k = http.TrailerPrefix + k
		for _, v := range vv {
			w.Header().Add(k, v)
		}
	}
}

// copyBody copies src to w to its end, flushing after each write when
// flush is set.
func copyBody(w http.ResponseWriter, src io.Reader, buf []byte, flush bool) error {
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if flush {
				_ = http.NewResponseController(w).Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}
