package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// echoOrigin answers by path and records what it was sent, as net/http
// parsed it (so header names compare case aside, and order aside).
type echoOrigin struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen string
}

func newEchoOrigin(t *testing.T) *echoOrigin {
	t.Helper()
	e := &echoOrigin{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s %s host=%q len=%d\n", r.Method, r.RequestURI, r.Proto, r.Host, r.ContentLength)
		keys := make([]string, 0, len(r.Header))
		for k := range r.Header {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s: %q\n", k, r.Header[k])
		}
		fmt.Fprintf(&b, "body %q", body)
		e.mu.Lock()
		e.seen = b.String()
		e.mu.Unlock()
		switch r.URL.Path {
		case "/chunked":
			w.Header().Set("Trailer", "X-Sum")
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "part one, ")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "part two")
			w.Header().Set("X-Sum", "42")
		case "/close": // an HTTP/1.0-style body: no length, ended by the close
			c, brw, _ := w.(http.Hijacker).Hijack()
			_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nuntil the end")
			_ = brw.Flush()
			_ = c.Close()
		case "/http10": // an HTTP/1.0 answer with a length
			c, brw, _ := w.(http.Hijacker).Hijack()
			_, _ = brw.WriteString("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nX-Old: yes\r\n\r\nhello")
			_ = brw.Flush()
			_ = c.Close()
		case "/odd": // lower-case names, an unknown status, named hop-by-hop headers
			c, brw, _ := w.(http.Hijacker).Hijack()
			_, _ = brw.WriteString("HTTP/1.1 299 \r\ncontent-type: text/plain\r\ncontent-length: 2\r\nconnection: x-a\r\nX-A: 1\r\nkeep-alive: 5\r\nx-b:\t b \r\n\r\nok")
			_ = brw.Flush()
			_ = c.Close()
		case "/closing": // a length, and the origin closes after
			c, brw, _ := w.(http.Hijacker).Hijack()
			_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbye")
			_ = brw.Flush()
			_ = c.Close()
		case "/big":
			_, _ = w.Write(bytes.Repeat([]byte("z"), 100<<10))
		case "/bighead":
			w.Header().Set("X-Long", strings.Repeat("h", 5000))
			_, _ = io.WriteString(w, "long head")
		case "/early":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			_, _ = io.WriteString(w, "after hints")
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		case "/503":
			w.Header().Set("Retry-After", "5")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			w.Header().Set("X-Origin", "echo")
			w.Header().Set("Connection", "X-Hop")
			w.Header().Set("X-Hop", "removed")
			w.Header().Add("Set-Cookie", "a=1")
			w.Header().Add("Set-Cookie", "b=2")
			_, _ = io.WriteString(w, "hello "+r.Method)
		}
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *echoOrigin) take() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.seen
	e.seen = ""
	return s
}

// exchange sends the raw request req on a new connection to addr and returns
// the response as text, without the Date header (net/http adds one the raw
// path does not; see raw.go).
func exchange(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	method, _, _ := strings.Cut(req, " ")
	return readAnswer(t, bufio.NewReader(c), method)
}

func readAnswer(t *testing.T, br *bufio.Reader, method string) string {
	t.Helper()
	var b strings.Builder
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 { // informational, then the answer
		fmt.Fprintf(&b, "%s %s\n", resp.Proto, resp.Status)
		_ = resp.Header.Write(&b)
		resp, err = http.ReadResponse(br, &http.Request{Method: method})
	}
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	resp.Header.Del("Date")
	fmt.Fprintf(&b, "%s %s te=%q len=%d close=%v\n", resp.Proto, resp.Status, resp.TransferEncoding, resp.ContentLength, resp.Close)
	_ = resp.Header.Write(&b)
	fmt.Fprintf(&b, "body %q trailer %v", body, resp.Trailer)
	return b.String()
}

// The raw path sends the origin what the other paths send, and passes the
// answer on as they do: each request goes to a proxy on its Server (raw
// path) and to one behind net/http (fast path), and both sides of both are
// compared.
func TestRawMatchesHandler(t *testing.T) {
	e := newEchoOrigin(t)
	snap := snapshot(publication.Origin{Name: "a1", Address: e.srv.URL, State: "healthy"})
	for _, poller := range []string{PollerLoop, PollerFIFO, PollerGo} {
		t.Run(poller, func(t *testing.T) {
			opts := Options{Retries: NoRetries, Poller: poller}
			rawMatchesHandler(t, e, newHarnessOn(t, opts, snap, true), newHarnessOn(t, opts, snap, false))
		})
	}
}

func rawMatchesHandler(t *testing.T, e *echoOrigin, raw, handler *harness) {
	const host = "Host: www.example.com\r\n"
	tests := []struct {
		name    string
		req     string
		handoff bool // the raw path leaves it to net/http
	}{
		{name: "GET with the usual headers", req: "GET /page HTTP/1.1\r\n" + host + "User-Agent: curl/8.0\r\nAccept: */*\r\nAccept-Encoding: gzip\r\n\r\n"},
		{name: "no User-Agent, none added", req: "GET / HTTP/1.1\r\n" + host + "\r\n"},
		{name: "empty User-Agent dropped", req: "GET / HTTP/1.1\r\n" + host + "User-Agent:\r\nUser-Agent: second\r\n\r\n"},
		{name: "forwarding headers replaced", req: "GET / HTTP/1.1\r\n" + host + "X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil\r\nX-Forwarded-Proto: https\r\nForwarded: for=6.6.6.6\r\n\r\n"},
		{name: "hop-by-hop removed", req: "GET / HTTP/1.1\r\n" + host + "Connection: keep-alive, X-Secret\r\nKeep-Alive: timeout=5\r\nX-Secret: s\r\nProxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\nX-Kept: k\r\n\r\n"},
		{name: "TE trailers kept, the rest not", req: "GET / HTTP/1.1\r\n" + host + "TE: gzip, trailers\r\n\r\n"},
		{name: "TE named by Connection", req: "GET / HTTP/1.1\r\n" + host + "TE: trailers\r\nConnection: TE\r\n\r\n"},
		{name: "repeated and mixed-case names", req: "GET / HTTP/1.1\r\n" + host + "x-multi: 1\r\nX-MULTI: 2\r\nx-custom-Header:  padded value \t\r\n\r\n"},
		{name: "path and query as they came", req: "GET /a%2Fb/!$&'()*+,;=:@~x?q=1&r=%20&s=a/b?c HTTP/1.1\r\n" + host + "\r\n"},
		{name: "empty query kept", req: "GET /p? HTTP/1.1\r\n" + host + "\r\n"},
		{name: "Host case, port and dot", req: "GET / HTTP/1.1\r\nHost: WWW.Example.com.:8080\r\n\r\n"},
		{name: "PUT body", req: "PUT /doc HTTP/1.1\r\n" + host + "Content-Length: 7\r\nContent-Type: text/plain\r\n\r\npayload"},
		{name: "POST without a body", req: "POST /form HTTP/1.1\r\n" + host + "Content-Length: 0\r\n\r\n"},
		{name: "DELETE with no length", req: "DELETE /doc HTTP/1.1\r\n" + host + "\r\n"},
		{name: "HEAD", req: "HEAD / HTTP/1.1\r\n" + host + "\r\n"},
		{name: "OPTIONS", req: "OPTIONS /x HTTP/1.1\r\n" + host + "\r\n"},
		{name: "visitor asks to close", req: "GET / HTTP/1.1\r\n" + host + "Connection: close\r\n\r\n"},
		{name: "chunked answer with a trailer", req: "GET /chunked HTTP/1.1\r\n" + host + "\r\n"},
		{name: "answer ended by close", req: "GET /close HTTP/1.1\r\n" + host + "\r\n"},
		{name: "103 then 200", req: "GET /early HTTP/1.1\r\n" + host + "\r\n"},
		{name: "204", req: "GET /204 HTTP/1.1\r\n" + host + "\r\n"},
		{name: "304", req: "GET /304 HTTP/1.1\r\n" + host + "If-None-Match: \"v1\"\r\n\r\n"},
		{name: "HTTP/1.0 answer", req: "GET /http10 HTTP/1.1\r\n" + host + "\r\n"},
		{name: "odd answer", req: "GET /odd HTTP/1.1\r\n" + host + "\r\n"},
		{name: "answer with a length, then close", req: "GET /closing HTTP/1.1\r\n" + host + "\r\n"},
		{name: "body larger than the buffers", req: "GET /big HTTP/1.1\r\n" + host + "\r\n"},
		{name: "head larger than the origin buffer", req: "GET /bighead HTTP/1.1\r\n" + host + "\r\n"},
		{name: "HEAD of a large body", req: "HEAD /big HTTP/1.1\r\n" + host + "\r\n"},
		{name: "503 passed on", req: "GET /503 HTTP/1.1\r\n" + host + "\r\n"},
		{name: "HTTP/1.0", req: "GET / HTTP/1.0\r\n" + host + "\r\n", handoff: true},
		{name: "chunked request body", req: "PUT /doc HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", handoff: true},
		{name: "POST body streamed", req: "POST /form HTTP/1.1\r\n" + host + "Content-Length: 3\r\n\r\nabc", handoff: true},
		{name: "query ReverseProxy re-encodes", req: "GET /p?a;b HTTP/1.1\r\n" + host + "\r\n", handoff: true},
		{name: "unknown host", req: "GET / HTTP/1.1\r\nHost: other.example.com\r\n\r\n", handoff: true},
		{name: "no Host", req: "GET / HTTP/1.1\r\n\r\n", handoff: true},
		{name: "two Hosts", req: "GET / HTTP/1.1\r\n" + host + host + "\r\n", handoff: true},
		{name: "bare LF", req: "GET / HTTP/1.1\n" + "Host: www.example.com\n\n", handoff: true},
		{name: "space before the colon", req: "GET / HTTP/1.1\r\nHost : www.example.com\r\n\r\n", handoff: true},
		{name: "absolute form", req: "GET http://www.example.com/ HTTP/1.1\r\n" + host + "\r\n", handoff: true},
		{name: "two lengths", req: "PUT /doc HTTP/1.1\r\n" + host + "Content-Length: 1\r\nContent-Length: 1\r\n\r\nx", handoff: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := raw.handoffs()
			gotRaw := exchange(t, strings.TrimPrefix(raw.url, "http://"), tt.req)
			sawRaw := e.take()
			gotHandler := exchange(t, strings.TrimPrefix(handler.url, "http://"), tt.req)
			sawHandler := e.take()
			if sawRaw != sawHandler {
				t.Errorf("the origin saw, from the raw path:\n%s\nfrom the handler:\n%s", sawRaw, sawHandler)
			}
			if gotRaw != gotHandler {
				t.Errorf("the visitor got, from the raw path:\n%s\nfrom the handler:\n%s", gotRaw, gotHandler)
			}
			if handed := raw.handoffs() > before; handed != tt.handoff {
				t.Errorf("handed off to net/http: %v, want %v", handed, tt.handoff)
			}
		})
	}
}

// Where the raw path and net/http differ on purpose: net/http.Server sniffs
// a Content-Type for an answer that has none, and http.ReadResponse drops
// a "Connection: close" header before the proxy can remove the headers it
// names. The raw path passes the answer on as it came, as HAProxy does,
// and removes what Connection names (RFC 9110 section 7.6.1).
func TestRawAnswerAsItCame(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, _ := w.(http.Hijacker).Hijack()
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: X-Secret, close\r\nX-Secret: s\r\nX-Kept: k\r\n\r\n<html")
		_ = brw.Flush()
	}))
	t.Cleanup(origin.Close)
	h := newHarness(t, Options{}, snapshot(publication.Origin{Name: "a1", Address: origin.URL, State: "healthy"}))
	for i := range 2 { // the second on a new origin connection
		got := exchange(t, strings.TrimPrefix(h.url, "http://"), "GET / HTTP/1.1\r\nHost: www.example.com\r\n\r\n")
		want := "HTTP/1.1 200 OK te=[] len=5 close=false\nContent-Length: 5\nX-Kept: k\nbody \"<html\" trailer map[]"
		if got = strings.ReplaceAll(got, "\r\n", "\n"); got != want {
			t.Errorf("request %d: got\n%s", i, got)
		}
	}
}

// handoffs counts the connections the raw path handed to net/http.
func (h *harness) handoffs() int64 {
	if h.server == nil {
		return 0
	}
	return h.server.handedOff.Load()
}

// After a hand-off, the connection goes on serving under net/http, and
// pipelined requests are answered in order on both paths.
func TestRawConnectionLife(t *testing.T) {
	e := newEchoOrigin(t)
	h := newHarness(t, Options{}, snapshot(publication.Origin{Name: "a1", Address: e.srv.URL, State: "healthy"}))
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	br := bufio.NewReader(c)
	get := "GET /one HTTP/1.1\r\nHost: www.example.com\r\n\r\n"
	// Two pipelined requests on the raw path, then one it hands off with
	// one more behind it, then one more.
	steps := []struct {
		send    string
		methods []string
		want    []string
	}{
		{get + strings.Replace(get, "/one", "/two", 1), []string{"GET", "GET"}, []string{"hello GET", "hello GET"}},
		{"PUT /x HTTP/1.1\r\nHost: www.example.com\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n" + get, []string{"PUT", "GET"}, []string{"hello PUT", "hello GET"}},
		{"HEAD / HTTP/1.1\r\nHost: www.example.com\r\n\r\n", []string{"HEAD"}, []string{""}},
	}
	for i, st := range steps {
		if _, err := io.WriteString(c, st.send); err != nil {
			t.Fatal(err)
		}
		for j, m := range st.methods {
			got := readAnswer(t, br, m)
			if !strings.Contains(got, "200 OK") || !strings.Contains(got, fmt.Sprintf("body %q", st.want[j])) {
				t.Fatalf("step %d answer %d: %s", i, j, got)
			}
		}
	}
	if n := h.handoffs(); n != 1 {
		t.Errorf("%d hand-offs, want 1 (the chunked PUT)", n)
	}
}

// A head larger than the raw path's buffer is net/http's, which takes it.
func TestRawLargeHead(t *testing.T) {
	e := newEchoOrigin(t)
	h := newHarness(t, Options{}, snapshot(publication.Origin{Name: "a1", Address: e.srv.URL, State: "healthy"}))
	big := strings.Repeat("x", visitorReadBuffer+100)
	got := exchange(t, strings.TrimPrefix(h.url, "http://"), "GET / HTTP/1.1\r\nHost: www.example.com\r\nX-Big: "+big+"\r\n\r\n")
	if !strings.Contains(got, "200 OK") || !strings.Contains(e.take(), big) {
		t.Fatalf("answer %.200s", got)
	}
	if h.handoffs() != 1 {
		t.Errorf("not handed off")
	}
}

// A stream is passed on as it comes: the visitor reads the first part
// while the origin still holds the rest.
func TestRawStreams(t *testing.T) {
	release := make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "data: second\n\n")
	}))
	t.Cleanup(origin.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	h := newHarness(t, Options{}, snapshot(publication.Origin{Name: "a1", Address: origin.URL, State: "healthy"}))
	req, _ := http.NewRequest(http.MethodGet, h.url+"/events", nil)
	req.Host = "www.example.com"
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: second\n\n" {
		t.Fatalf("rest %q", rest)
	}
}

// An idle connection is closed after the idle timeout, and a head that
// does not come whole within the header timeout ends its connection.
func TestRawTimeouts(t *testing.T) {
	e := newEchoOrigin(t)
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.SetSnapshot(snapshot(publication.Origin{Name: "a1", Address: e.srv.URL, State: "healthy"}))
	addr := serveRaw(t, p.NewServer(100*time.Millisecond, 300*time.Millisecond))
	tests := []struct {
		name  string
		send  string
		bound time.Duration // the connection is closed by then
	}{
		{"idle after a request", "GET / HTTP/1.1\r\nHost: www.example.com\r\n\r\n", 300 * time.Millisecond},
		{"half a head", "GET / HTTP/1.1\r\nHost: www.ex", 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			if _, err := io.WriteString(c, tt.send); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = io.Copy(io.Discard, c) // returns when the proxy closes it
			if err != nil {
				t.Fatalf("the proxy did not close the connection: %v", err)
			}
			if took := time.Since(start); took < tt.bound {
				t.Errorf("closed after %v, before the timeout %v", took, tt.bound)
			}
		})
	}
}

// Close ends the raw path's connections and those handed to net/http.
func TestRawServerClose(t *testing.T) {
	e := newEchoOrigin(t)
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.SetSnapshot(snapshot(publication.Origin{Name: "a1", Address: e.srv.URL, State: "healthy"}))
	s, addr, done := startUnmanaged(t, p)
	var conns []net.Conn
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: www.example.com\r\n\r\n",                           // stays on the raw path
		"GET / HTTP/1.0\r\nHost: www.example.com\r\nConnection: keep-alive\r\n\r\n", // handed off
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		method, _, _ := strings.Cut(req, " ")
		br := bufio.NewReader(c)
		if got := readAnswer(t, br, method); !strings.Contains(got, "200 OK") {
			t.Fatalf("answer %s", got)
		}
		conns = append(conns, c)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != http.ErrServerClosed {
		t.Errorf("Serve returned %v", err)
	}
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil || n != 0 {
			t.Errorf("connection %d still open after Close (%d, %v)", i, n, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := s.Serve(ln); err != http.ErrServerClosed {
		t.Errorf("Serve after Close returned %v", err)
	}
}

// A visitor that leaves during a large answer costs nothing but that
// answer: the next request is served.
func TestRawVisitorLeaves(t *testing.T) {
	big := bytes.Repeat([]byte("y"), 4<<20)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = w.Write(big)
			return
		}
		_, _ = io.WriteString(w, "small")
	}))
	t.Cleanup(origin.Close)
	h := newHarness(t, Options{}, snapshot(publication.Origin{Name: "a1", Address: origin.URL, State: "healthy"}))
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: www.example.com\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	for range 3 {
		resp, body := h.do(t, http.MethodGet, "www.example.com", "")
		if resp.StatusCode != 200 || body != "small" {
			t.Fatalf("after a visitor left: %d %q", resp.StatusCode, body)
		}
	}
}

// FuzzParseRequest: a head the raw path takes is one net/http reads the
// same way: method, target, Host, length, and every header passed on.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"PUT /x?y=1 HTTP/1.1\r\nHost: a:80\r\nContent-Length: 3\r\nConnection: close, x-a\r\nX-A: 1\r\n\r\n",
		"GET /%41 HTTP/1.1\r\nHost: [::1]:8080\r\nTE: trailers\r\nUser-Agent: u\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: \t v \t\r\n\r\n",
		"GET / HTTP/1.1\r\nhost: a\r\ncontent-length: 0007\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		end, ok := headEnd(in)
		if end == 0 || !ok {
			return
		}
		head := in[:end]
		var r rawRequest
		if !parseRequest(head, &r) {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("the raw path takes %q, net/http refuses it: %v", head, err)
		}
		if req.Method != string(r.method) || req.RequestURI != string(r.target) || req.Host != string(r.host) {
			t.Fatalf("%q: net/http reads %s %s host %q", head, req.Method, req.RequestURI, req.Host)
		}
		if want := max(r.contentLength, 0); req.ContentLength != want {
			t.Fatalf("%q: length %d, net/http %d", head, r.contentLength, req.ContentLength)
		}
		if !cleanQuery(req.URL.RawQuery) || req.URL.RequestURI() != string(r.target) {
			t.Fatalf("%q: ReverseProxy would send %q", head, req.URL.RequestURI())
		}
		for _, h := range r.headers {
			if !slices.Contains(req.Header[http.CanonicalHeaderKey(string(h.name))], string(h.value)) {
				t.Fatalf("%q: header %s: %q not what net/http read: %q", head, h.name, h.value, req.Header[http.CanonicalHeaderKey(string(h.name))])
			}
		}
		if req.Close != r.close {
			t.Fatalf("%q: close %v, net/http %v", head, r.close, req.Close)
		}
	})
}

// FuzzParseAnswer: an answer head the raw path reads in place is one
// http.ReadResponse reads the same way: status, length, and close.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
		"HTTP/1.1 503 \r\nretry-after: 5\r\ncontent-length: 0\r\nConnection: close, x\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nContent-Length: 0007\r\n\r\n",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, head bool) {
		end, ok := headEnd(in)
		if end == 0 || !ok {
			return
		}
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		rc := &rawConn{}
		a, ok := rc.parseAnswer(in[:end], method)
		if !ok {
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(in[:end])), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("the raw path reads %q, http.ReadResponse refuses it: %v", in[:end], err)
		}
		if resp.StatusCode != a.status || resp.Close != a.close {
			t.Fatalf("%q: status %d close %v, http.ReadResponse %d %v", in[:end], a.status, a.close, resp.StatusCode, resp.Close)
		}
		if a.length >= 0 && resp.ContentLength != a.length {
			t.Fatalf("%q: length %d, http.ReadResponse %d", in[:end], a.length, resp.ContentLength)
		}
		if _, retry := resp.Header["Retry-After"]; retry != a.retryAfter {
			t.Fatalf("%q: retry-after %v", in[:end], a.retryAfter)
		}
	})
}

// rawOrigin is an origin written byte by byte: answer gets each request's
// method and path and returns what to send; after idle without a request
// it sends idleBye (if any), closes the connection and says so on closed.
type rawOrigin struct {
	addr   string
	closed chan struct{}
}

func newRawOrigin(t *testing.T, idle time.Duration, idleBye string, answer func(method, path string) string) *rawOrigin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &rawOrigin{addr: "http://" + ln.Addr().String(), closed: make(chan struct{}, 16)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn // closed at the end: the proxy keeps idle ones
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if idle > 0 {
						_ = c.SetReadDeadline(time.Now().Add(idle))
					}
					req, err := http.ReadRequest(br)
					if err != nil {
						if ne, ok := err.(net.Error); ok && ne.Timeout() {
							_, _ = io.WriteString(c, idleBye)
							_ = c.Close()
							o.closed <- struct{}{}
						}
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, answer(req.Method, req.URL.Path)); err != nil {
						return
					}
				}
			})
		}
	})
	return o
}

// An origin that sends more than its answer (a body after HEAD, 204 or
// 304, or past Content-Length) never gets those bytes taken for another
// visitor's answer: the connection is not reused.
func TestRawNoAnswerFromAnotherRequest(t *testing.T) {
	const injected = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nX-Injected: yes\r\n\r\nPWNED!"
	tests := []struct {
		name, method, answer string
	}{
		{"body after HEAD", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 61\r\n\r\n" + injected},
		{"body after 204", "GET", "HTTP/1.1 204 No Content\r\n\r\n" + injected},
		{"body after 304", "GET", "HTTP/1.1 304 Not Modified\r\n\r\n" + injected},
		{"past Content-Length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + injected},
	}
	for _, raw := range []bool{true, false} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s raw=%v", tt.name, raw), func(t *testing.T) {
				o := newRawOrigin(t, 0, "", func(method, path string) string {
					if path == "/evil" {
						return tt.answer
					}
					return "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nyour-doc"
				})
				h := newHarnessOn(t, Options{Retries: NoRetries}, snapshot(publication.Origin{Name: "a1", Address: o.addr, State: "healthy"}), raw)
				addr := strings.TrimPrefix(h.url, "http://")
				exchange(t, addr, tt.method+" /evil HTTP/1.1\r\nHost: www.example.com\r\n\r\n")
				for i := range 3 {
					got := exchange(t, addr, "GET /doc HTTP/1.1\r\nHost: www.example.com\r\n\r\n")
					if !strings.Contains(got, `body "your-doc"`) || strings.Contains(got, "Injected") {
						t.Fatalf("request %d after the odd answer got:\n%s", i, got)
					}
				}
			})
		}
	}
}

// An idle origin connection the origin closed, or closed after a 408, is
// not used: a request that cannot be replayed (a POST) still gets its
// answer, and the origin is not counted as failing.
func TestRawIdleOriginClosed(t *testing.T) {
	for _, bye := range []string{"", "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"} {
		for _, raw := range []bool{true, false} {
			t.Run(fmt.Sprintf("408=%v raw=%v", bye != "", raw), func(t *testing.T) {
				o := newRawOrigin(t, 50*time.Millisecond, bye, func(method, path string) string {
					return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
				})
				h := newHarnessOn(t, Options{Retries: NoRetries}, snapshot(publication.Origin{Name: "a1", Address: o.addr, State: "healthy"}), raw)
				if resp, _ := h.do(t, http.MethodGet, "www.example.com", ""); resp.StatusCode != 200 {
					t.Fatalf("first request: %d", resp.StatusCode)
				}
				<-o.closed // the origin ended the idle connection
				for _, m := range []string{http.MethodPost, http.MethodDelete} {
					if resp, body := h.do(t, m, "www.example.com", ""); resp.StatusCode != 200 || body != "ok" {
						t.Errorf("%s after the origin closed: %d %q", m, resp.StatusCode, body)
					}
				}
				if n := counter(t, h.p.m.originErrors.WithLabelValues("www", "a1", "connect_error")); n != 0 {
					t.Errorf("%v connect errors counted against a healthy origin", n)
				}
			})
		}
	}
}

// Close returns while a visitor is on a stream the origin holds open.
func TestRawCloseDuringStream(t *testing.T) {
	hold := make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(origin.Close)
	t.Cleanup(func() { close(hold) })
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.SetSnapshot(snapshot(publication.Origin{Name: "a1", Address: origin.URL, State: "healthy"}))
	s, addr, _ := startUnmanaged(t, p)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /events HTTP/1.1\r\nHost: www.example.com\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for { // up to the first event
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(l, "data: first") {
			break
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting on the stream after 10s")
	}
}

// A body with a length, from an origin that closes after it, may take
// longer than the response timeout (which bounds the head only), and a
// request body that comes late in the idle time is still read.
func TestRawSlowBodies(t *testing.T) {
	t.Run("answer body", func(t *testing.T) {
		origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, brw, _ := w.(http.Hijacker).Hijack()
			defer c.Close()
			_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\nConnection: close\r\n\r\nhello")
			_ = brw.Flush()
			time.Sleep(300 * time.Millisecond) // past the response timeout
			_, _ = brw.WriteString("world")
			_ = brw.Flush()
		}))
		t.Cleanup(origin.Close)
		h := newHarness(t, Options{ResponseTimeout: 100 * time.Millisecond}, snapshot(publication.Origin{Name: "a1", Address: origin.URL, State: "healthy"}))
		if resp, body := h.do(t, http.MethodGet, "www.example.com", ""); resp.StatusCode != 200 || body != "helloworld" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
	t.Run("request body", func(t *testing.T) {
		e := newEchoOrigin(t)
		p, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		p.SetSnapshot(snapshot(publication.Origin{Name: "a1", Address: e.srv.URL, State: "healthy"}))
		addr := serveRaw(t, p.NewServer(time.Second, 300*time.Millisecond))
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		time.Sleep(200 * time.Millisecond) // most of the idle time gone
		if _, err := io.WriteString(c, "PUT /doc HTTP/1.1\r\nHost: www.example.com\r\nContent-Length: 5\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // past the first idle deadline
		if _, err := io.WriteString(c, "hello"); err != nil {
			t.Fatal(err)
		}
		if got := readAnswer(t, bufio.NewReader(c), "PUT"); !strings.Contains(got, `body "hello PUT"`) {
			t.Fatalf("answer %s", got)
		}
	})
}

// A request body is read into a buffer that grows as the bytes come: a
// head announcing 8 MiB that sends 5 bytes costs kilobytes, not 8 MiB.
func TestRawReadBody(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		length int64
		err    bool
	}{
		{"in one piece", []string{"hello"}, 5, false},
		{"in pieces", []string{strings.Repeat("a", 3000), strings.Repeat("b", 5000), strings.Repeat("c", 9000)}, 17000, false},
		{"short, then gone", []string{"hello"}, 8 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, server := net.Pipe()
			t.Cleanup(func() { client.Close(); server.Close() })
			rc := &rawConn{s: &Server{idleTimeout: time.Minute}, c: server, br: bufio.NewReaderSize(server, visitorReadBuffer)}
			go func() {
				for _, c := range tt.chunks {
					if _, err := io.WriteString(client, c); err != nil {
						return
					}
				}
				if tt.err {
					client.Close()
				}
			}()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			body, err := rc.readBody(tt.length)
			runtime.ReadMemStats(&after)
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want one: %v", err, tt.err)
			}
			if !tt.err && string(body) != strings.Join(tt.chunks, "") {
				t.Fatalf("body of %d bytes, not what was sent", len(body))
			}
			if tt.err && after.TotalAlloc-before.TotalAlloc > 1<<20 {
				t.Errorf("%d bytes allocated for a body that never came", after.TotalAlloc-before.TotalAlloc)
			}
		})
	}
}

// An origin that never reads a request body is a timeout, bounded by the
// response timeout, not a visitor's goroutine stuck for good.
func TestRawOriginNotReading(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // accepted, never read
			mu.Unlock()
		}
	}()
	h := newHarness(t, Options{ResponseTimeout: 200 * time.Millisecond, MaxReplayBody: 64 << 20, Retries: NoRetries},
		snapshot(publication.Origin{Name: "a1", Address: "http://" + ln.Addr().String(), State: "healthy"}))
	body := strings.Repeat("x", 32<<20) // far more than the socket buffers hold
	resp, _ := h.do(t, http.MethodPut, "www.example.com", body)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	if n := counter(t, h.p.m.originErrors.WithLabelValues("www", "a1", "timeout")); n != 1 {
		t.Errorf("%v timeouts counted, want 1", n)
	}
}

// countingOrigin answers "ok" and counts the connections it accepts.
func countingOrigin(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// An idle origin connection is reused past the read deadline its last
// answer left on it (the idle check does not read through deadlines).
func TestIdleReusedPastResponseTimeout(t *testing.T) {
	for _, raw := range []bool{true, false} {
		t.Run(fmt.Sprintf("raw=%v", raw), func(t *testing.T) {
			srv, conns := countingOrigin(t)
			h := newHarnessOn(t, Options{ResponseTimeout: 100 * time.Millisecond}, snapshot(publication.Origin{Name: "a1", Address: srv.URL, State: "healthy"}), raw)
			for i := range 2 {
				if resp, _ := h.do(t, http.MethodGet, "www.example.com", ""); resp.StatusCode != 200 {
					t.Fatalf("request %d: %d", i, resp.StatusCode)
				}
				time.Sleep(300 * time.Millisecond) // past 1.125 x the response timeout
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("the origin accepted %d connections, want 1 (the idle one reused)", n)
			}
		})
	}
}

// Close while a request waits for an answer head from one of two origins:
// no retry on the other origin, no failure counted, and Close returns.
func TestRawCloseDuringHeadWait(t *testing.T) {
	var reqs atomic.Int64
	got := make(chan int64, 4)
	hold := make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := reqs.Add(1)
		got <- n
		if n > 1 { // a stream whose head came and no event yet
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
		}
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	})
	a, b := httptest.NewServer(handler), httptest.NewServer(handler)
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	t.Cleanup(func() { close(hold) })
	reg := prometheus.NewRegistry()
	p, err := New(Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	p.SetSnapshot(snapshot(publication.Origin{Name: "a1", Address: a.URL, State: "healthy"}, publication.Origin{Name: "a2", Address: b.URL, State: "healthy"}))
	s, addr, _ := startUnmanaged(t, p)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /events HTTP/1.1\r\nHost: www.example.com\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-got // an origin has the request and holds its head
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting 10s after it began")
	}
	if n := reqs.Load(); n != 1 {
		t.Errorf("%d origin requests, want 1: no retry once Close began", n)
	}
	for _, o := range []string{"a1", "a2"} {
		if n := counter(t, p.m.originErrors.WithLabelValues("www", o, "connect_error")); n != 0 {
			t.Errorf("origin %s: %v failures counted for the shutdown", o, n)
		}
	}
}

// startUnmanaged serves p on a loopback port for a test that closes the
// server itself: it returns the server, its address and Serve's result.
func startUnmanaged(t *testing.T, p *Proxy) (*Server, string, chan error) {
	t.Helper()
	s := p.NewServer(0, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	return s, ln.Addr().String(), done
}
