package proxy

// The raw path: an HTTP/1.1 request head parsed in place, sent to an http
// origin over the fast path's pooled connections (fast.go), and the answer
// written straight to the visitor's connection. It takes only requests it
// can forward exactly as the other paths do; the rest go to net/http
// (server.go), whose own rules and errors then apply.
//
// What it takes: an HTTP/1.1 request in origin form ("/path?query") whose
// path and query ReverseProxy would pass on unchanged, a method that is a
// token (not CONNECT), one Host naming a published site whose origins are
// all http, header names that are tokens and values without control
// characters, at most one Content-Length, and no Transfer-Encoding, Expect,
// Upgrade or Trailer. A body must be one that can be replayed (an
// idempotent method and at most MaxReplayBody bytes): other bodies are
// streamed by the net/http path.
//
// What it sends: the request line and the headers as they came (the names
// as the visitor spelled them, in its order), less the hop-by-hop ones and
// those Connection names, with the same Host, User-Agent, Content-Length,
// "Te: trailers" and X-Forwarded-For/-Host/-Proto as the other paths.
//
// What it answers: the origin's status, its headers less the hop-by-hop
// ones, and the body as it came when it has a length, or chunked when it
// has none (as net/http.Server does), with the trailers. Unlike net/http it
// adds no Date header an origin did not send. A visitor that goes away
// while the origin is still answering is noticed when the answer is
// written, not before (HAProxy without abortonclose does the same): the
// wait is bounded by ResponseTimeout.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"time"
)

// rawRequest is a request head parsed in place: its slices point into the
// connection's copy of the head.
type rawRequest struct {
	method, target, host, ua []byte
	contentLength            int64 // -1: none
	close                    bool  // Connection: close
	teTrailers               bool  // TE names trailers
	uaSeen                   bool
	headers                  []rawHeader // forwarded as they came
	named                    [][]byte    // the headers Connection names: hop-by-hop
}

type rawHeader struct{ name, value []byte }

// parseRequest parses head, a whole head whose lines all end with CRLF,
// into r, and reports whether the raw path takes the request.
func parseRequest(head []byte, r *rawRequest) bool {
	*r = rawRequest{headers: r.headers[:0], named: r.named[:0], contentLength: -1}
	eol := bytes.IndexByte(head, '\n')
	line, rest := head[:eol-1], head[eol+1:]
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || !isToken(line[:sp]) || string(line[:sp]) == http.MethodConnect {
		return false
	}
	r.method, line = line[:sp], line[sp+1:]
	sp = bytes.IndexByte(line, ' ')
	if sp <= 0 || string(line[sp+1:]) != "HTTP/1.1" || !cleanTarget(line[:sp]) {
		return false
	}
	r.target = line[:sp]
	for {
		eol = bytes.IndexByte(rest, '\n')
		line, rest = rest[:eol-1], rest[eol+1:]
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !isToken(line[:colon]) {
			return false
		}
		name, value := line[:colon], trimOWS(line[colon+1:])
		if !fieldValue(value) {
			return false
		}
		switch {
		case asciiEq(name, "host"):
			if r.host != nil || !cleanHost(value) {
				return false
			}
			r.host = value
		case asciiEq(name, "content-length"):
			if r.contentLength >= 0 {
				return false
			}
			if r.contentLength = digits(value); r.contentLength < 0 {
				return false
			}
		case asciiEq(name, "transfer-encoding"), asciiEq(name, "expect"), asciiEq(name, "upgrade"), asciiEq(name, "trailer"):
			return false
		case asciiEq(name, "connection"):
			for len(value) > 0 {
				var tok []byte
				if i := bytes.IndexByte(value, ','); i >= 0 {
					tok, value = trimOWS(value[:i]), value[i+1:]
				} else {
					tok, value = trimOWS(value), nil
				}
				switch {
				case len(tok) == 0:
				case asciiEq(tok, "upgrade"):
					return false
				case asciiEq(tok, "close"):
					r.close = true
					r.named = append(r.named, tok)
				default:
					r.named = append(r.named, tok)
				}
			}
		case asciiEq(name, "te"):
			if tokenIn(string(value), "trailers") {
				r.teTrailers = true
			}
		case asciiEq(name, "user-agent"):
			if !r.uaSeen {
				r.uaSeen, r.ua = true, value
			}
		case hopOrForwarded(name):
		default:
			r.headers = append(r.headers, rawHeader{name, value})
		}
	}
	return r.host != nil
}

// hopOrForwarded: request headers never passed on as they came (hop-by-hop,
// or replaced by the proxy's X-Forwarded-*), as reqExcluded.
func hopOrForwarded(name []byte) bool {
	switch len(name) {
	case 9:
		return asciiEq(name, "forwarded")
	case 10:
		return asciiEq(name, "keep-alive")
	case 15:
		return asciiEq(name, "x-forwarded-for")
	case 16:
		return asciiEq(name, "proxy-connection") || asciiEq(name, "x-forwarded-host")
	case 17:
		return asciiEq(name, "x-forwarded-proto")
	case 18:
		return asciiEq(name, "proxy-authenticate")
	case 19:
		return asciiEq(name, "proxy-authorization")
	}
	return false
}

// asciiEq reports whether b is lower, ASCII case aside.
func asciiEq(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func asciiEqFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// tchar is RFC 9110's token character set.
var tchar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !tchar[c] {
			return false
		}
	}
	return true
}

// pathChar are the bytes of a path that url.URL.EscapedPath gives back as
// they came (with "%" and two hex digits): unreserved, sub-delims, ":", "@"
// and "/".
var pathChar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "-._~!$&'()*+,;=:@/" {
		t[c] = true
	}
	return t
}()

// cleanTarget reports whether an origin-form request target is passed on
// unchanged by the other paths: a path of pathChar and valid escapes, and a
// query cleanQuery accepts of the same bytes and "?".
func cleanTarget(t []byte) bool {
	if len(t) == 0 || t[0] != '/' {
		return false
	}
	i := 0
	for ; i < len(t) && t[i] != '?'; i++ {
		switch c := t[i]; {
		case c == '%':
			if i+2 >= len(t) || !ishex(t[i+1]) || !ishex(t[i+2]) {
				return false
			}
			i += 2
		case !pathChar[c]:
			return false
		}
	}
	if i == len(t) {
		return true
	}
	q := t[i+1:]
	for _, c := range q {
		if !pathChar[c] && c != '?' && c != '%' {
			return false
		}
	}
	return cleanQuery(string(q))
}

// cleanHost: a Host of name, IPv4 or bracketed IPv6 characters and a port.
func cleanHost(h []byte) bool {
	if len(h) == 0 {
		return false
	}
	for _, c := range h {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '-', c == '_', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}

// fieldValue: no control character but HTAB (RFC 9110 section 5.5).
func fieldValue(v []byte) bool {
	for _, c := range v {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// digits parses a Content-Length, or returns -1.
func digits(b []byte) int64 {
	if len(b) == 0 || len(b) > 18 {
		return -1
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// methodString avoids an allocation for the common methods.
func methodString(b []byte) string {
	switch string(b) {
	case http.MethodGet:
		return http.MethodGet
	case http.MethodHead:
		return http.MethodHead
	case http.MethodPost:
		return http.MethodPost
	case http.MethodPut:
		return http.MethodPut
	case http.MethodDelete:
		return http.MethodDelete
	case http.MethodOptions:
		return http.MethodOptions
	case http.MethodPatch:
		return http.MethodPatch
	}
	return string(b)
}

// lookupSite finds the site a Host names, without an allocation for a
// Host that is already lower case and has no port or trailing dot.
func lookupSite(sites map[string]*site, host []byte) *site {
	for _, c := range host {
		if ('A' <= c && c <= 'Z') || c == ':' || c == '[' {
			return sites[NormalizeHost(string(host))]
		}
	}
	if host[len(host)-1] == '.' {
		return sites[NormalizeHost(string(host))]
	}
	return sites[string(host)]
}

// serveRequest serves the request whose head is the first n bytes read. It
// reports take = false, having read and written nothing, for a request the
// raw path does not take; keep says the connection stays open.
func (rc *rawConn) serveRequest(n int) (keep, take bool) {
	p := rc.p
	if n == 0 {
		return false, false
	}
	buf, _ := rc.br.Peek(n)
	rc.head = append(rc.head[:0], buf...)
	r := &rc.req
	if !parseRequest(rc.head, r) {
		return false, false
	}
	st := p.state.Load()
	if st == nil {
		return false, false
	}
	s := lookupSite(st.sites, r.host)
	if s == nil || len(s.origins) == 0 || !s.fast {
		return false, false
	}
	method := methodString(r.method)
	retryable := idempotent(method)
	if r.contentLength > 0 && (!retryable || r.contentLength > p.opts.MaxReplayBody) {
		return false, false
	}
	_, _ = rc.br.Discard(n)
	defer rc.endRequest()
	var body []byte
	if r.contentLength > 0 {
		var err error
		if body, err = rc.readBody(r.contentLength); err != nil {
			return false, true // the visitor went away within its body
		}
	}
	start := p.opts.Now()
	from := s.weight != 0 && s.toFrom()
	try := func(o *origin) (answer, *upConn, error) { return rc.attempt(o, method, body) }
	// Shutting down: not the origin's failure, and no retry.
	closing := func(err error) bool { return err != nil && rc.s.closing.Load() }
	a, uc, o, err := p.tries(s, from, retryable, start, try, closing)
	code := http.StatusBadGateway
	if err != nil {
		p.opts.Log.Warn("request failed on every origin tried", "site", s.pub.Name, "method", method, "error", err)
		keep = rc.replyError(method, code, fmt.Sprintf("vigil-node: no origin of site %q answered; try again later", s.pub.Name))
	} else {
		code = a.status
		if a.resp != nil {
			keep = rc.respond(method, o.up, uc, a.resp)
		} else {
			keep = rc.respondRaw(method, o.up, uc, &a)
		}
	}
	s.m.code(p.m, s.pub.Name, code/100).Inc()
	s.m.observer(p.m, s.pub.Name).Observe(p.opts.Now().Sub(start).Seconds())
	return keep && !r.close, true
}

// readBody reads a request body of length bytes, the buffer growing as
// they come (a head announcing a body costs nothing until it arrives). The
// body has the idle timeout to come, from its head on.
func (rc *rawConn) readBody(length int64) ([]byte, error) {
	if d := time.Now().Add(rc.s.idleTimeout); rc.deadline.Before(d.Add(-rc.s.idleTimeout / 10)) {
		rc.deadline = d
		if err := rc.c.SetReadDeadline(d); err != nil {
			return nil, err
		}
	}
	body := rc.body[:0]
	for int64(len(body)) < length {
		if len(body) == cap(body) {
			body = slices.Grow(body, int(min(max(int64(cap(body)), 4<<10), length-int64(len(body)))))
		}
		n, err := rc.br.Read(body[len(body):min(int64(cap(body)), length)])
		body = body[:len(body)+n]
		if err != nil && int64(len(body)) < length {
			return nil, err
		}
	}
	rc.body = body
	return body, nil
}

// endRequest drops what a request left: the origin connection it used, and
// buffers an idle connection should not keep.
func (rc *rawConn) endRequest() {
	rc.up.Store(nil)
	if cap(rc.body) > keepBuffer {
		rc.body = nil
	}
	if cap(rc.head) > keepBuffer {
		rc.head = nil
	}
}

// attempt sends the request to o and reads the response's header. A
// kept-alive connection the origin closed meanwhile is replaced by a new
// one, once, for a request http.Transport would have replayed.
func (rc *rawConn) attempt(o *origin, method string, body []byte) (answer, *upConn, error) {
	for fresh := false; ; fresh = true {
		var uc *upConn
		var err error
		if fresh {
			uc, err = o.up.dialFor(bgContext, rc.task)
		} else {
			uc, err = o.up.get(bgContext, rc.task)
		}
		if err != nil {
			return answer{}, nil, err
		}
		uc.stop = nil
		rc.up.Store(uc)
		if rc.s.closing.Load() {
			rc.up.Store(nil)
			_ = uc.c.Close()
			return answer{}, nil, net.ErrClosed
		}
		a, err := rc.roundTrip(uc, method, body)
		if err == nil {
			return a, uc, nil
		}
		_ = uc.c.Close()
		if fresh || !uc.reused || !rc.replayable(method, body) || !stale(err) {
			return answer{}, nil, err
		}
	}
}

// replayable is http.Transport's rule (fast.go's replayable) on a raw head.
func (rc *rawConn) replayable(method string, body []byte) bool {
	if body != nil {
		return false
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	for _, h := range rc.req.headers {
		if asciiEq(h.name, "idempotency-key") || asciiEq(h.name, "x-idempotency-key") {
			return true
		}
	}
	return false
}

// bgContext: the raw path's dials are bounded by ConnectTimeout alone.
var bgContext = context.Background()

// readRequests are what http.ReadResponse needs of the request: its method.
var readRequests = map[string]*http.Request{}

func init() {
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodPatch} {
		readRequests[m] = &http.Request{Method: m}
	}
}

// roundTrip sends the request on uc and reads the answer's head: in place
// when it is a plain one (rawresp.go), else with http.ReadResponse.
func (rc *rawConn) roundTrip(uc *upConn, method string, body []byte) (answer, error) {
	p := rc.p
	rc.writeHead(uc.bw, method, body)
	if len(body) > 0 {
		// An origin that does not read its request: the write is bounded
		// by ResponseTimeout too (a head alone fits the socket's buffer).
		if err := uc.c.SetWriteDeadline(time.Now().Add(p.opts.ResponseTimeout)); err != nil {
			return answer{}, err
		}
		_, _ = uc.bw.Write(body)
	}
	if err := uc.bw.Flush(); err != nil {
		return answer{}, err
	}
	if len(body) > 0 {
		if err := uc.c.SetWriteDeadline(time.Time{}); err != nil {
			return answer{}, err
		}
	}
	if now := time.Now(); uc.deadline.IsZero() || uc.deadline.Before(now.Add(p.opts.ResponseTimeout)) {
		uc.deadline = now.Add(p.opts.ResponseTimeout + p.opts.ResponseTimeout/8)
		if err := uc.c.SetReadDeadline(uc.deadline); err != nil {
			return answer{}, err
		}
	}
	if a, ok, err := rc.peekAnswer(uc, method); ok || err != nil {
		return a, err
	}
	req := readRequests[method]
	if req == nil {
		req = &http.Request{Method: method}
	}
	for n1xx := 0; ; {
		resp, err := http.ReadResponse(uc.br, req)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return answer{}, timeoutError{}
			}
			return answer{}, err
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return answer{}, errors.New("the origin switched protocols, which the request did not ask for")
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			if n1xx++; n1xx > max1xxResponses {
				return answer{}, errors.New("net/http: too many 1xx informational responses")
			}
			_, _ = rc.bw.WriteString(statusLine(resp.StatusCode))
			_ = resp.Header.Write(rc.bw)
			_, _ = rc.bw.WriteString("\r\n")
			_ = rc.bw.Flush()
			continue
		}
		if resp.ContentLength < 0 || int64(uc.br.Buffered()) < resp.ContentLength {
			uc.deadline = time.Time{}
			if err := uc.c.SetReadDeadline(time.Time{}); err != nil {
				return answer{}, err
			}
		}
		_, retryAfter := resp.Header["Retry-After"]
		return answer{resp: resp, status: resp.StatusCode, retryAfter: retryAfter}, nil
	}
}

// writeHead writes the request head for an origin, as fast.go's writeHead
// does from an http.Request.
func (rc *rawConn) writeHead(bw *bufio.Writer, method string, body []byte) {
	r := &rc.req
	_, _ = bw.WriteString(method)
	_ = bw.WriteByte(' ')
	_, _ = bw.Write(r.target)
	_, _ = bw.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = bw.Write(r.host)
	_, _ = bw.WriteString("\r\n")
	if len(r.ua) > 0 {
		_, _ = bw.WriteString("User-Agent: ")
		_, _ = bw.Write(r.ua)
		_, _ = bw.WriteString("\r\n")
	}
	switch {
	case body != nil:
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.WriteString(strconv.Itoa(len(body)))
		_, _ = bw.WriteString("\r\n")
	case method != http.MethodGet && method != http.MethodHead:
		_, _ = bw.WriteString("Content-Length: 0\r\n")
	}
	for _, h := range r.headers {
		if len(r.named) > 0 && rc.named(h.name) {
			continue
		}
		_, _ = bw.Write(h.name)
		_, _ = bw.WriteString(": ")
		_, _ = bw.Write(h.value)
		_, _ = bw.WriteString("\r\n")
	}
	if r.teTrailers && !rc.named([]byte("te")) {
		_, _ = bw.WriteString("Te: trailers\r\n")
	}
	if rc.ip != "" {
		_, _ = bw.WriteString("X-Forwarded-For: ")
		_, _ = bw.WriteString(rc.ip)
		_, _ = bw.WriteString("\r\n")
	}
	_, _ = bw.WriteString("X-Forwarded-Host: ")
	_, _ = bw.Write(r.host)
	_, _ = bw.WriteString("\r\nX-Forwarded-Proto: http\r\n\r\n")
}

func (rc *rawConn) named(name []byte) bool {
	for _, n := range rc.req.named {
		if asciiEqFold(n, name) {
			return true
		}
	}
	return false
}

// respond passes resp on to the visitor, then releases uc. It reports
// whether the visitor's connection can serve another request.
func (rc *rawConn) respond(method string, up *upstream, uc *upConn, resp *http.Response) bool {
	bw := rc.bw
	removeHopByHop(resp.Header)
	code := resp.StatusCode
	noBody := method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
	chunked := !noBody && resp.ContentLength < 0
	_, _ = bw.WriteString(statusLine(resp.StatusCode))
	if len(resp.Trailer) > 0 {
		keys := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		_, _ = bw.WriteString("Trailer: ")
		for i, k := range keys {
			if i > 0 {
				_, _ = bw.WriteString(", ")
			}
			_, _ = bw.WriteString(k)
		}
		_, _ = bw.WriteString("\r\n")
	}
	if chunked {
		resp.Header.Del("Content-Length")
	}
	_ = resp.Header.Write(bw)
	if chunked {
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if rc.req.close {
		_, _ = bw.WriteString("Connection: close\r\n")
	}
	_, _ = bw.WriteString("\r\n")
	var err error
	switch {
	case noBody:
	case chunked:
		err = rc.copyChunked(resp)
	case isEventStream(resp):
		err = rc.copyFlushing(bw, resp.Body)
	default:
		err = copyInto(bw, resp.Body)
	}
	rc.up.Store(nil)
	up.release(uc, resp, err == nil)
	if err != nil {
		_ = bw.Flush() // what came, then the cut: the visitor sees its connection close
		return false
	}
	return bw.Flush() == nil
}

// copyInto copies src to bw's own buffer, flushing it when full: no
// buffer of its own, and no bufio.Writer.ReadFrom, which hands a large body
// to the connection's ReadFrom and its 32 KiB buffer per call.
func copyInto(bw *bufio.Writer, src io.Reader) error {
	for {
		if bw.Available() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		buf := bw.AvailableBuffer()[:bw.Available()]
		n, rerr := src.Read(buf)
		if n > 0 {
			_, _ = bw.Write(buf[:n])
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

func isEventStream(resp *http.Response) bool {
	ct := resp.Header["Content-Type"]
	if len(ct) == 0 || len(ct[0]) < 17 || !asciiEq([]byte(ct[0][:17]), "text/event-stream") {
		return false
	}
	base, _, _ := mime.ParseMediaType(ct[0])
	return base == "text/event-stream"
}

// copyChunked passes a body of unknown length on chunked, each read flushed
// at once (a stream), then the trailers.
func (rc *rawConn) copyChunked(resp *http.Response) error {
	cw := httputil.NewChunkedWriter(rc.bw)
	if err := rc.copyFlushing(cw, resp.Body); err != nil {
		return err
	}
	if err := cw.Close(); err != nil {
		return err
	}
	if err := resp.Trailer.Write(rc.bw); err != nil {
		return err
	}
	_, err := rc.bw.WriteString("\r\n")
	return err
}

func (rc *rawConn) copyFlushing(w io.Writer, src io.Reader) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			if err := rc.bw.Flush(); err != nil {
				return err
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

// replyError answers the request itself, as http.Error does.
func (rc *rawConn) replyError(method string, code int, msg string) bool {
	bw := rc.bw
	_, _ = bw.WriteString(statusLine(code))
	_, _ = bw.WriteString("Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nContent-Length: ")
	_, _ = bw.WriteString(strconv.Itoa(len(msg) + 1))
	if rc.req.close {
		_, _ = bw.WriteString("\r\nConnection: close")
	}
	_, _ = bw.WriteString("\r\n\r\n")
	if method != http.MethodHead {
		_, _ = bw.WriteString(msg)
		_ = bw.WriteByte('\n')
	}
	return bw.Flush() == nil
}
