package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

const siteHost = "site.example"

// seen is what an origin recorded about one request, keyed by path.
type seen struct {
	host, userAgent, uri, sni string
}

// testOrigin is a loopback origin with one handler per health check path.
type testOrigin struct {
	url      string
	release  chan struct{} // closed at cleanup: unblocks hanging handlers
	requests sync.Map      // path -> seen
	newConns atomic.Int64
	redirect atomic.Int64 // hits on the redirect target
	bodySent chan int64   // bytes written by /huge, once per request
}

const hugeBodyMax = 256 << 20

func newOrigin(t *testing.T, tlsCert *tls.Certificate) *testOrigin {
	t.Helper()
	o := &testOrigin{release: make(chan struct{}), bodySent: make(chan int64, 16)}

	// The redirect target: another host (another port) that must never be
	// asked, since probes do not follow redirects.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.redirect.Add(1)
	}))
	t.Cleanup(other.Close)

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s := seen{host: r.Host, userAgent: r.UserAgent(), uri: r.RequestURI}
		if r.TLS != nil {
			s.sni = r.TLS.ServerName
		}
		o.requests.Store(r.URL.Path, s)
		io.WriteString(w, "all good: vigil-ok\n")
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/landing", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/unavailable", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		<-o.release
	})
	mux.HandleFunc("/stall", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-o.release
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		// "vigil-head" at the start, "vigil-tail" after 1 MiB, then filler
		// until hugeBodyMax or until the client goes away.
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		var n int64
		write := func(b []byte) bool {
			m, err := w.Write(b)
			n += int64(m)
			return err == nil
		}
		ok := write([]byte("vigil-head"))
		for ok && n < 1<<20 {
			ok = write(chunk)
		}
		ok = ok && write([]byte("vigil-tail"))
		for ok && n < hugeBodyMax {
			ok = write(chunk)
		}
		o.bodySent <- n
	})

	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			o.newConns.Add(1)
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshake failures are expected
	if tlsCert != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{*tlsCert}}
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(o.release) }) // runs before srv.Close
	o.url = srv.URL
	return o
}

func (o *testOrigin) seen(t *testing.T, path string) seen {
	t.Helper()
	v, ok := o.requests.Load(path)
	if !ok {
		t.Fatalf("origin got no request for %s", path)
	}
	return v.(seen)
}

type want struct {
	up     bool
	reason Reason
	status int
}

func check(t *testing.T, got Result, err error, w want) {
	t.Helper()
	if err != nil {
		t.Fatalf("Do: unexpected error: %v", err)
	}
	if got.Up != w.up || got.Reason != w.reason || got.Status != w.status {
		t.Fatalf("got up=%v reason=%s status=%d (detail %q), want up=%v reason=%s status=%d",
			got.Up, got.Reason, got.Status, got.Detail, w.up, w.reason, w.status)
	}
	if got.Detail == "" {
		t.Errorf("result has no detail")
	}
	t.Logf("detail: %s (latency %v)", got.Detail, got.Latency)
}

func TestDoHTTP(t *testing.T) {
	o := newOrigin(t, nil)
	short := 300 * time.Millisecond

	cases := []struct {
		name string
		req  Request
		want want
	}{
		{"200", Request{Path: "/health"}, want{true, OK, 200}},
		{"default path", Request{}, want{true, OK, 200}},
		{"404 is up", Request{Path: "/missing"}, want{true, OK, 404}},
		{"301 is up and not followed", Request{Path: "/moved"}, want{true, OK, 301}},
		{"503 is down", Request{Path: "/unavailable"}, want{false, HTTP5xx, 503}},
		{"hang past the timeout", Request{Path: "/hang", Timeout: short}, want{false, Timeout, 0}},
		{"stall after headers, no body check", Request{Path: "/stall", Timeout: short}, want{true, OK, 200}},
		{"stall after headers, body check", Request{Path: "/stall", Timeout: short, ExpectedBody: "vigil-ok"}, want{false, Timeout, 200}},
		{"huge body, no body check", Request{Path: "/huge"}, want{true, OK, 200}},
		{"huge body, text in the prefix", Request{Path: "/huge", ExpectedBody: "vigil-head"}, want{true, OK, 200}},
		{"huge body, text past the cap", Request{Path: "/huge", ExpectedBody: "vigil-tail"}, want{false, BodyMismatch, 200}},

		{"expected status listed", Request{Path: "/health", ExpectedStatuses: []int{200, 204}}, want{true, OK, 200}},
		{"expected status not listed", Request{Path: "/missing", ExpectedStatuses: []int{200}}, want{false, UnexpectedStatus, 404}},
		{"5xx stays 5xx even when expected", Request{Path: "/unavailable", ExpectedStatuses: []int{503}}, want{false, HTTP5xx, 503}},
		{"body text found", Request{Path: "/health", ExpectedBody: "vigil-ok"}, want{true, OK, 200}},
		{"body text missing", Request{Path: "/health", ExpectedBody: "not-there"}, want{false, BodyMismatch, 200}},
		{"body check on a 5xx stays 5xx", Request{Path: "/unavailable", ExpectedBody: "not-there"}, want{false, HTTP5xx, 503}},
		{"within latency limit", Request{Path: "/health", MaxLatency: time.Minute}, want{true, OK, 200}},
		{"over latency limit", Request{Path: "/health", MaxLatency: time.Nanosecond}, want{false, TooSlow, 200}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Address = o.url
			req.Host = siteHost
			got, err := Do(context.Background(), req)
			check(t, got, err, tc.want)
			if tc.want.reason == Timeout && tc.want.status == 0 && got.Latency < req.Timeout {
				t.Errorf("timed out after %v, before the %v timeout", got.Latency, req.Timeout)
			}
			if req.Path == "/huge" {
				// The client reads at most the cap and hangs up; the origin
				// must fail to write its whole body.
				if n := <-o.bodySent; n >= hugeBodyMax {
					t.Errorf("origin wrote the whole %d byte body: the read is not capped", n)
				}
			}
		})
	}
	t.Run("redirect target never asked", func(t *testing.T) {
		if n := o.redirect.Load(); n != 0 {
			t.Fatalf("redirect target got %d requests", n)
		}
	})
}

func TestDoRequestLine(t *testing.T) {
	o := newOrigin(t, nil)
	cases := []struct {
		name          string
		req           Request
		path          string
		wantHost      string
		wantUserAgent string
		wantURI       string
	}{
		{"defaults", Request{Host: siteHost, Path: "/a"}, "/a", siteHost, DefaultUserAgent, "/a"},
		{"user agent override", Request{Host: siteHost, Path: "/b", UserAgent: "acme-probe/2"}, "/b", siteHost, "acme-probe/2", "/b"},
		{"query kept", Request{Host: siteHost, Path: "/c?deep=1&x=%2F"}, "/c", siteHost, DefaultUserAgent, "/c?deep=1&x=%2F"},
		{"escaped path kept", Request{Host: siteHost, Path: "/d%2Fe"}, "/d/e", siteHost, DefaultUserAgent, "/d%2Fe"},
		{"host defaults to the address", Request{Path: "/f"}, "/f", strings.TrimPrefix(o.url, "http://"), DefaultUserAgent, "/f"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Address = o.url
			got, err := Do(context.Background(), req)
			check(t, got, err, want{true, OK, 200})
			s := o.seen(t, tc.path)
			if tc.name == "host defaults to the address" {
				// Host defaults to Address's host name, without the port.
				h, _, _ := net.SplitHostPort(tc.wantHost)
				tc.wantHost = h
			}
			if s.host != tc.wantHost || s.userAgent != tc.wantUserAgent || s.uri != tc.wantURI {
				t.Fatalf("origin saw Host %q, User-Agent %q, URI %q; want %q, %q, %q",
					s.host, s.userAgent, s.uri, tc.wantHost, tc.wantUserAgent, tc.wantURI)
			}
		})
	}
}

func TestDoNoConnectionReuse(t *testing.T) {
	o := newOrigin(t, nil)
	const probes = 5
	for range probes {
		got, err := Do(context.Background(), Request{Address: o.url, Host: siteHost})
		check(t, got, err, want{true, OK, 200})
	}
	if n := o.newConns.Load(); n != probes {
		t.Fatalf("origin saw %d connections for %d probes, want one each", n, probes)
	}
}

func TestDoTLS(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	valid := leaf(t, ca, []string{siteHost}, now.Add(-time.Hour), now.Add(time.Hour))
	selfSigned := leaf(t, nil, []string{siteHost}, now.Add(-time.Hour), now.Add(time.Hour))
	expired := leaf(t, ca, []string{siteHost}, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	wrongName := leaf(t, ca, []string{"other.example"}, now.Add(-time.Hour), now.Add(time.Hour))

	validOrigin := newOrigin(t, &valid)
	plainOrigin := newOrigin(t, nil)

	cases := []struct {
		name string
		addr string
		req  Request
		want want
	}{
		{"valid for a test CA", validOrigin.url, Request{RootCAs: ca.pool}, want{true, OK, 200}},
		{"valid cert, CA not trusted", validOrigin.url, Request{}, want{false, TLSFailed, 0}},
		{"self-signed", newOrigin(t, &selfSigned).url, Request{RootCAs: ca.pool}, want{false, TLSFailed, 0}},
		{"self-signed, verification off", newOrigin(t, &selfSigned).url, Request{InsecureSkipVerify: true}, want{true, OK, 200}},
		{"expired", newOrigin(t, &expired).url, Request{RootCAs: ca.pool}, want{false, TLSFailed, 0}},
		{"wrong name", newOrigin(t, &wrongName).url, Request{RootCAs: ca.pool}, want{false, TLSFailed, 0}},
		{"not TLS at all", strings.Replace(plainOrigin.url, "http://", "https://", 1), Request{RootCAs: ca.pool}, want{false, TLSFailed, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Address, req.Host, req.Path = tc.addr, siteHost, "/tls"
			got, err := Do(context.Background(), req)
			check(t, got, err, tc.want)
		})
	}

	t.Run("Host header and SNI are the site", func(t *testing.T) {
		got, err := Do(context.Background(), Request{Address: validOrigin.url, Host: siteHost, Path: "/sni", RootCAs: ca.pool})
		check(t, got, err, want{true, OK, 200})
		s := validOrigin.seen(t, "/sni")
		if s.host != siteHost || s.sni != siteHost {
			t.Fatalf("origin saw Host %q and SNI %q, want %q for both", s.host, s.sni, siteHost)
		}
	})
}

func TestDoConnectFailures(t *testing.T) {
	refused := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr
	}
	// reset accepts, reads the start of the request and closes with
	// SO_LINGER 0, which sends a TCP RST.
	reset := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		t.Cleanup(func() { ln.Close(); <-done })
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Read(make([]byte, 1))
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}
		}()
		return "http://" + ln.Addr().String()
	}
	cases := []struct {
		name   string
		addr   func(*testing.T) string
		detail string
	}{
		{"refused", refused, "refused"},
		{"reset", reset, "reset"},
		{"reset during TLS", func(t *testing.T) string {
			return strings.Replace(reset(t), "http://", "https://", 1)
		}, "reset"},
		// A label over 63 bytes is not a domain name: the lookup fails
		// without asking any DNS server, so the test needs no network.
		{"DNS failure", func(*testing.T) string { return "http://" + strings.Repeat("x", 64) + ".invalid" }, "DNS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Do(context.Background(), Request{Address: tc.addr(t), Host: siteHost, Timeout: 2 * time.Second})
			check(t, got, err, want{false, ConnectFailed, 0})
			if !strings.Contains(got.Detail, tc.detail) {
				t.Errorf("detail %q does not mention %q", got.Detail, tc.detail)
			}
		})
	}
}

func TestDoCallerContext(t *testing.T) {
	o := newOrigin(t, nil)
	t.Run("already canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := Do(ctx, Request{Address: o.url})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got error %v, want context.Canceled", err)
		}
	})
	t.Run("caller deadline before the probe timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		t.Cleanup(cancel)
		_, err := Do(ctx, Request{Address: o.url, Path: "/hang", Timeout: time.Minute})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got error %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestDoInvalidRequest(t *testing.T) {
	cases := []struct {
		name string
		req  Request
		want string // in the error text
	}{
		{"empty address", Request{}, "address is empty"},
		{"no scheme", Request{Address: "origin.example:80"}, "scheme"},
		{"host only", Request{Address: "origin.example"}, "no scheme"},
		{"bad scheme", Request{Address: "ftp://origin.example"}, `"ftp"`},
		{"no host", Request{Address: "http://"}, "no host"},
		{"port only", Request{Address: "http://:8080"}, "no host"},
		{"opaque", Request{Address: "http:origin.example"}, "no host"},
		{"credentials", Request{Address: "https://admin:s3cret@origin.example"}, "credentials"},
		{"path", Request{Address: "http://origin.example/health"}, "path"},
		{"query", Request{Address: "http://origin.example?token=s3cret"}, "query"},
		{"fragment", Request{Address: "http://origin.example#x"}, "fragment"},
		{"port not a number", Request{Address: "http://origin.example:http"}, "port"},
		{"port out of range", Request{Address: "http://origin.example:99999"}, "port"},
		{"not a URL", Request{Address: "http://[::1"}, "not a URL"},
		{"control character", Request{Address: "http://origin.example\n"}, "not a URL"},
		{"relative path", Request{Address: "http://origin.example", Path: "health"}, `start with "/"`},
		{"path with space", Request{Address: "http://origin.example", Path: "/a b?token=s3cret"}, "spaces"},
		{"path with fragment", Request{Address: "http://origin.example", Path: "/a#b"}, "fragment"},
		{"host with port", Request{Address: "http://origin.example", Host: "site.example:443"}, "without a port"},
		{"host with path", Request{Address: "http://origin.example", Host: "site.example/x"}, "bare hostname"},
		{"user agent with newline", Request{Address: "http://origin.example", UserAgent: "a\r\nX-Evil: 1"}, "user agent"},
		{"negative timeout", Request{Address: "http://origin.example", Timeout: -time.Second}, "timeout"},
		{"negative max latency", Request{Address: "http://origin.example", MaxLatency: -1}, "max latency"},
		{"bad expected status", Request{Address: "http://origin.example", ExpectedStatuses: []int{200, 42}}, "42"},
		{"expected body too long", Request{Address: "http://origin.example", ExpectedBody: strings.Repeat("x", BodyLimit+1)}, "longer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			verr := tc.req.Validate()
			got, err := Do(context.Background(), tc.req)
			for _, e := range []error{verr, err} {
				if !errors.Is(e, ErrInvalidRequest) {
					t.Fatalf("got error %v, want ErrInvalidRequest", e)
				}
				if !strings.Contains(e.Error(), tc.want) {
					t.Errorf("error %q does not mention %q", e, tc.want)
				}
				if strings.Contains(e.Error(), "s3cret") {
					t.Errorf("error %q leaks a secret", e)
				}
			}
			if got.Up {
				t.Errorf("invalid request came out up")
			}
		})
	}

	valid := []Request{
		{Address: "http://origin.example"},
		{Address: "https://origin.example/", Host: "site.example", Path: "/health?full=1"},
		{Address: "https://203.0.113.10:8443", Host: "2001:db8::1"},
		{Address: "http://[2001:db8::1]:8080", Host: "[2001:db8::1]"},
	}
	for _, r := range valid {
		if err := r.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", r, err)
		}
	}
}

func TestBodyContainsAcrossReads(t *testing.T) {
	body := strings.Repeat("a", 1000) + "needle" + strings.Repeat("b", 1000)
	cases := []struct {
		name string
		r    io.Reader
		text string
		want bool
	}{
		{"one byte reads", iotest.OneByteReader(strings.NewReader(body)), "needle", true},
		{"half reads", iotest.HalfReader(strings.NewReader(body)), "needle", true},
		{"missing", iotest.OneByteReader(strings.NewReader(body)), "pin", false},
		{"at the very end of the cap", strings.NewReader(strings.Repeat("a", BodyLimit-3) + "end"), "end", true},
		{"just past the cap", strings.NewReader(strings.Repeat("a", BodyLimit-2) + "end"), "end", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := bodyContains(tc.r, tc.text)
			if err != nil || got != tc.want {
				t.Fatalf("bodyContains = %v, %v; want %v, nil", got, err, tc.want)
			}
		})
	}
	t.Run("read error", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := bodyContains(iotest.ErrReader(boom), "x")
		if !errors.Is(err, boom) {
			t.Fatalf("got %v, want %v", err, boom)
		}
	})
}

// silentOrigin accepts connections and never says a word. Each connection's
// end (the client hanging up) is reported on the returned channel.
func silentOrigin(t *testing.T) (addr string, hungUp <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{}, 16)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(io.Discard, c) // returns when the client closes
				closed <- struct{}{}
			}()
		}
	}()
	return ln.Addr().String(), closed
}

func TestDoTimeoutCoversEveryStage(t *testing.T) {
	const timeout = 200 * time.Millisecond
	cases := []struct {
		name   string
		scheme string
	}{
		{"no response headers", "http://"},
		{"no TLS handshake", "https://"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, hungUp := silentOrigin(t)
			got, err := Do(context.Background(), Request{Address: tc.scheme + addr, Host: siteHost, Timeout: timeout})
			check(t, got, err, want{false, Timeout, 0})
			if got.Latency < timeout {
				t.Errorf("timed out after %v, before the %v timeout", got.Latency, timeout)
			}
			// The connection must not outlive the probe.
			select {
			case <-hungUp:
			case <-time.After(10 * time.Second):
				t.Fatal("the probe's connection is still open after Do returned")
			}
		})
	}
}
