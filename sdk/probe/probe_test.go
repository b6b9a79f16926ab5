package probe

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/vigilcdn/vigil/sdk/sdktest"
)

const siteHost = "site.example"

// seen is what an origin recorded about one request, keyed by path.
type seen struct {
	host, userAgent, uri, sni, proto string
	header                           http.Header
}

// testOrigin is a loopback origin with one handler per health check path.
type testOrigin struct {
	url      string
	port     string
	release  chan struct{} // closed at cleanup: unblocks hanging handlers
	requests sync.Map      // path -> seen
	newConns atomic.Int64
	redirect atomic.Int64 // hits on the off-host redirect target
	bodySent chan int64   // bytes written by /huge and /fifty, once per request
	ended    chan string  // paths of the endless handlers that ended
}

const (
	hugeBodyMax  = 256 << 20
	fiftyMB      = 50_000_000
	originHTTP1  = false
	originHTTP2  = true
	dripInterval = 10 * time.Millisecond
)

// newOrigin starts an HTTP/1.1 origin, over TLS with tlsCert when it is not
// nil.
func newOrigin(t *testing.T, tlsCert *tls.Certificate) *testOrigin {
	t.Helper()
	return startOrigin(t, tlsCert, originHTTP1)
}

// newH2Origin starts a TLS origin that speaks HTTP/2 only: its ALPN list is
// just "h2", so an HTTP/1.1-only client cannot even finish the handshake.
func newH2Origin(t *testing.T, tlsCert *tls.Certificate) *testOrigin {
	t.Helper()
	return startOrigin(t, tlsCert, originHTTP2)
}

func startOrigin(t *testing.T, tlsCert *tls.Certificate, h2 bool) *testOrigin {
	t.Helper()
	o := &testOrigin{release: make(chan struct{}), bodySent: make(chan int64, 16), ended: make(chan string, 16)}

	// The off-host redirect target: another host (another port) that must
	// never be asked.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.redirect.Add(1)
	}))
	t.Cleanup(other.Close)

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s := seen{host: r.Host, userAgent: r.UserAgent(), uri: r.RequestURI, proto: r.Proto, header: r.Header.Clone()}
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
	mux.HandleFunc("/big-headers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("b", 300<<10))
		io.WriteString(w, "vigil-ok")
	})
	mux.HandleFunc("/okstall", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "vigil-ok")
		w.(http.Flusher).Flush()
		<-o.release
	})
	mux.HandleFunc("/drip", func(w http.ResponseWriter, r *http.Request) {
		// ?n bytes, one every dripInterval.
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		tick := time.NewTicker(dripInterval)
		defer tick.Stop()
		for range n {
			select {
			case <-tick.C:
			case <-r.Context().Done():
				return
			case <-o.release:
				return
			}
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		// Filler as fast as the client takes it, until it goes away.
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				o.ended <- r.URL.Path
				return
			}
		}
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
	mux.HandleFunc("/fifty", func(w http.ResponseWriter, r *http.Request) {
		// A 50 MB body with a Content-Length, sent as fast as it is taken.
		w.Header().Set("Content-Length", strconv.Itoa(fiftyMB))
		chunk := bytes.Repeat([]byte("y"), 64<<10)
		var n int64
		for n < fiftyMB {
			m, err := w.Write(chunk[:min(len(chunk), fiftyMB-int(n))])
			n += int64(m)
			if err != nil {
				break
			}
		}
		o.bodySent <- n
	})
	mux.HandleFunc("/short", func(w http.ResponseWriter, r *http.Request) {
		// Promises 100 bytes, sends 10 and hangs up.
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "0123456789")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	})
	redirects(mux, o, other.URL)

	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			o.newConns.Add(1)
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshake failures are expected
	if tlsCert != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{*tlsCert}}
		if h2 {
			// ALPN offers only "h2", and a client that asks for no
			// protocol is not served HTTP/1.1 either.
			srv.EnableHTTP2 = true
			srv.TLS.NextProtos = []string{"h2"}
			srv.Config.Protocols = new(http.Protocols)
			srv.Config.Protocols.SetHTTP2(true)
		}
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(o.release) }) // runs before srv.Close
	o.url = srv.URL
	_, o.port, _ = net.SplitHostPort(srv.Listener.Addr().String())
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
		t.Fatalf("got up=%v reason=%s status=%d (phase %q, detail %q), want up=%v reason=%s status=%d",
			got.Up, got.Reason, got.Status, got.Phase, got.Detail, w.up, w.reason, w.status)
	}
	if got.Detail == "" {
		t.Errorf("result has no detail")
	}
	if got.Up != (got.Phase == "") {
		t.Errorf("up=%v with phase %q: a down result must have a phase, an up one none", got.Up, got.Phase)
	}
	if got.Duration < got.Latency {
		t.Errorf("duration %v is shorter than latency %v", got.Duration, got.Latency)
	}
	t.Logf("detail: %s (phase %q, proto %s, latency %v, duration %v, body %d bytes)",
		got.Detail, got.Phase, got.Proto, got.Latency, got.Duration, got.BodyBytes)
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
		{"response headers too large", Request{Path: "/big-headers"}, want{false, ConnectFailed, 0}},

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
			if got.Proto != "HTTP/1.1" {
				t.Errorf("proto %q, want HTTP/1.1", got.Proto)
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

// TestDoRequestHeaders checks the headers a probe sends, over HTTP/1.1 and
// HTTP/2: the extra ones arrive, nothing asks for compression.
func TestDoRequestHeaders(t *testing.T) {
	ca := newTestCA(t)
	cert := leaf(t, ca, []string{siteHost}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	origins := []struct {
		name  string
		o     *testOrigin
		proto string
	}{
		{"HTTP/1.1", newOrigin(t, nil), "HTTP/1.1"},
		{"HTTP/2", newH2Origin(t, &cert), "HTTP/2.0"},
	}
	extra := http.Header{
		"Authorization": {"Bearer s3cret"},
		"x-lower-case":  {"kept"},
		"Accept":        {"text/plain", "text/html"},
	}
	for _, oc := range origins {
		t.Run(oc.name, func(t *testing.T) {
			got, err := Do(context.Background(), Request{
				Address: oc.o.url, Host: siteHost, Path: "/headers", Header: extra, RootCAs: ca.pool,
			})
			check(t, got, err, want{true, OK, 200})
			s := oc.o.seen(t, "/headers")
			if s.proto != oc.proto || got.Proto != oc.proto {
				t.Errorf("origin saw %s, result says %s, want %s", s.proto, got.Proto, oc.proto)
			}
			if v := s.header.Get("Authorization"); v != "Bearer s3cret" {
				t.Errorf("Authorization %q", v)
			}
			if v := s.header.Get("X-Lower-Case"); v != "kept" {
				t.Errorf("X-Lower-Case %q", v)
			}
			if v := s.header.Values("Accept"); len(v) != 2 || v[0] != "text/plain" || v[1] != "text/html" {
				t.Errorf("Accept %q, want both values in order", v)
			}
			if v := s.header.Get("User-Agent"); v != DefaultUserAgent {
				t.Errorf("User-Agent %q", v)
			}
			if v, ok := s.header["Accept-Encoding"]; ok {
				t.Errorf("probe asked for compression: Accept-Encoding %q", v)
			}
			if strings.Contains(got.Detail, "s3cret") {
				t.Errorf("detail %q leaks a header value", got.Detail)
			}
		})
	}
}

// TestDoNoConnectionReuse runs probes to one address alternating between two
// sites: each must get a new connection carrying its own Host and, over
// TLS, its own SNI, over HTTP/1.1 and HTTP/2 alike.
func TestDoNoConnectionReuse(t *testing.T) {
	ca := newTestCA(t)
	hosts := []string{siteHost, "other.example"}
	cert := leaf(t, ca, hosts, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	origins := []struct {
		name  string
		o     *testOrigin
		tls   bool
		proto string
	}{
		{"HTTP/1.1", newOrigin(t, nil), false, "HTTP/1.1"},
		{"HTTP/1.1 over TLS", newOrigin(t, &cert), true, "HTTP/1.1"},
		{"HTTP/2", newH2Origin(t, &cert), true, "HTTP/2.0"},
	}
	const probes = 6
	for _, oc := range origins {
		t.Run(oc.name, func(t *testing.T) {
			for i := range probes {
				host := hosts[i%len(hosts)]
				path := fmt.Sprintf("/reuse/%d", i)
				got, err := Do(context.Background(), Request{Address: oc.o.url, Host: host, Path: path, RootCAs: ca.pool})
				check(t, got, err, want{true, OK, 200})
				if got.Proto != oc.proto {
					t.Errorf("proto %q, want %q", got.Proto, oc.proto)
				}
				s := oc.o.seen(t, path)
				if s.host != host || (oc.tls && s.sni != host) {
					t.Errorf("probe %d for %s: origin saw Host %q, SNI %q", i, host, s.host, s.sni)
				}
			}
			if n := oc.o.newConns.Load(); n != probes {
				t.Fatalf("origin saw %d connections for %d probes, want one each", n, probes)
			}
		})
	}
}

func TestDoTLS(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	valid := leaf(t, ca, []string{siteHost}, now.Add(-time.Hour), now.Add(time.Hour))
	selfSigned := leaf(t, nil, []string{siteHost}, now.Add(-time.Hour), now.Add(time.Hour))
	expired := leaf(t, ca, []string{siteHost}, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	wrongName := leaf(t, ca, []string{"other.example"}, now.Add(-time.Hour), now.Add(time.Hour))
	originName := leaf(t, ca, []string{"origin-a.internal"}, now.Add(-time.Hour), now.Add(time.Hour))

	validOrigin := newOrigin(t, &valid)
	plainOrigin := newOrigin(t, nil)
	originNamed := newOrigin(t, &originName)

	cases := []struct {
		name string
		addr string
		req  Request
		want want
	}{
		{"valid for a private CA", validOrigin.url, Request{RootCAs: ca.pool}, want{true, OK, 200}},
		{"valid cert, private CA not trusted", validOrigin.url, Request{}, want{false, TLSFailed, 0}},
		{"self-signed", newOrigin(t, &selfSigned).url, Request{RootCAs: ca.pool}, want{false, TLSFailed, 0}},
		{"self-signed, verification off", newOrigin(t, &selfSigned).url, Request{InsecureSkipVerify: true}, want{true, OK, 200}},
		{"expired", newOrigin(t, &expired).url, Request{RootCAs: ca.pool}, want{false, TLSFailed, 0}},
		{"expired, verification off", newOrigin(t, &expired).url, Request{InsecureSkipVerify: true}, want{true, OK, 200}},
		{"wrong name", newOrigin(t, &wrongName).url, Request{RootCAs: ca.pool}, want{false, TLSFailed, 0}},
		{"not TLS at all", strings.Replace(plainOrigin.url, "http://", "https://", 1), Request{RootCAs: ca.pool}, want{false, TLSFailed, 0}},
		{"cert names the origin, not the site", originNamed.url, Request{RootCAs: ca.pool}, want{false, TLSFailed, 0}},
		{"cert names the origin, ServerName set", originNamed.url, Request{RootCAs: ca.pool, ServerName: "origin-a.internal"}, want{true, OK, 200}},
		{"ServerName set, cert names the site", validOrigin.url, Request{RootCAs: ca.pool, ServerName: "origin-a.internal"}, want{false, TLSFailed, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Address, req.Host, req.Path = tc.addr, siteHost, "/tls"
			got, err := Do(context.Background(), req)
			check(t, got, err, tc.want)
			if !got.Up && got.Phase != PhaseTLS {
				t.Errorf("phase %q, want %q", got.Phase, PhaseTLS)
			}
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
	t.Run("ServerName is the SNI, Host stays the Host header", func(t *testing.T) {
		got, err := Do(context.Background(), Request{Address: originNamed.url, Host: siteHost, Path: "/sni", RootCAs: ca.pool, ServerName: "origin-a.internal"})
		check(t, got, err, want{true, OK, 200})
		s := originNamed.seen(t, "/sni")
		if s.host != siteHost || s.sni != "origin-a.internal" {
			t.Fatalf("origin saw Host %q and SNI %q, want %q and %q", s.host, s.sni, siteHost, "origin-a.internal")
		}
	})
}

func TestDoHTTP2(t *testing.T) {
	ca := newTestCA(t)
	cert := leaf(t, ca, []string{siteHost}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	o := newH2Origin(t, &cert)

	for _, alpn := range [][]string{{"http/1.1"}, nil} {
		t.Run(fmt.Sprintf("the origin refuses HTTP/1.1, ALPN %q", alpn), func(t *testing.T) {
			client := &http.Client{Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: ca.pool, ServerName: siteHost, NextProtos: alpn},
				TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1 only
			}}
			t.Cleanup(client.CloseIdleConnections)
			resp, err := client.Get(o.url + "/h1")
			if err == nil {
				resp.Body.Close()
				t.Fatalf("an HTTP/1.1-only client got %s from the h2-only origin", resp.Status)
			}
			t.Logf("HTTP/1.1 client: %v", err)
		})
	}

	cases := []struct {
		name string
		req  Request
		want want
	}{
		{"200", Request{Path: "/health"}, want{true, OK, 200}},
		{"404 is up", Request{Path: "/missing"}, want{true, OK, 404}},
		{"503 is down", Request{Path: "/unavailable"}, want{false, HTTP5xx, 503}},
		{"body text found", Request{Path: "/health", ExpectedBody: "vigil-ok"}, want{true, OK, 200}},
		{"body text missing", Request{Path: "/health", ExpectedBody: "not-there"}, want{false, BodyMismatch, 200}},
		{"hang past the timeout", Request{Path: "/hang", Timeout: 300 * time.Millisecond}, want{false, Timeout, 0}},
		{"response headers too large", Request{Path: "/big-headers"}, want{false, ConnectFailed, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Address, req.Host, req.RootCAs = o.url, siteHost, ca.pool
			got, err := Do(context.Background(), req)
			check(t, got, err, tc.want)
			if got.Proto != "HTTP/2.0" {
				t.Errorf("proto %q, want HTTP/2.0", got.Proto)
			}
		})
	}
	t.Run("origin saw HTTP/2 with the site as authority and SNI", func(t *testing.T) {
		s := o.seen(t, "/health")
		if s.proto != "HTTP/2.0" || s.host != siteHost || s.sni != siteHost {
			t.Fatalf("origin saw %s, Host %q, SNI %q", s.proto, s.host, s.sni)
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
		return "http://" + rawOrigin(t, func(c net.Conn, _ []byte) {
			c.(*net.TCPConn).SetLinger(0)
		}, false)
	}
	resetDuringTLS := func(t *testing.T) string {
		return "https://" + rawOrigin(t, func(c net.Conn, _ []byte) {
			c.Read(make([]byte, 1)) // the start of the client hello
			c.(*net.TCPConn).SetLinger(0)
		}, true)
	}
	cases := []struct {
		name   string
		addr   func(*testing.T) string
		phase  Phase
		detail string
	}{
		{"refused", refused, PhaseConnect, "refused"},
		{"reset", reset, PhaseHeaders, "reset"},
		{"reset during TLS", resetDuringTLS, PhaseTLS, "reset"},
		// A label over 63 bytes is not a domain name: the lookup fails
		// without asking any DNS server, so the test needs no network.
		{"DNS failure", func(*testing.T) string { return "http://" + strings.Repeat("x", 64) + ".invalid" }, PhaseDNS, "DNS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Do(context.Background(), Request{Address: tc.addr(t), Host: siteHost, Timeout: 2 * time.Second})
			check(t, got, err, want{false, ConnectFailed, 0})
			if !strings.Contains(got.Detail, tc.detail) {
				t.Errorf("detail %q does not mention %q", got.Detail, tc.detail)
			}
			if got.Phase != tc.phase {
				t.Errorf("phase %q, want %q", got.Phase, tc.phase)
			}
		})
	}
}

// rawOrigin is a TCP server that hands each connection to serve, with the
// request head it read, or at once (head nil) when atOnce is set. It closes
// the connection when serve returns. It returns the listening address.
func rawOrigin(t *testing.T, serve func(c net.Conn, request []byte), atOnce bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				if atOnce {
					serve(c, nil)
					return
				}
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				var head []byte
				for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
					line, err := br.ReadSlice('\n')
					head = append(head, line...)
					if err != nil {
						return
					}
				}
				c.SetReadDeadline(time.Time{})
				serve(c, head)
			})
		}
	})
	return ln.Addr().String()
}

// TestDoHTTP1Wire checks the HTTP/1.1 exchange byte by byte, against origins
// that answer in ways net/http's server never would.
func TestDoHTTP1Wire(t *testing.T) {
	write := func(s string) func(net.Conn, []byte) {
		return func(c net.Conn, _ []byte) { io.WriteString(c, s) }
	}
	cases := []struct {
		name      string
		serve     func(net.Conn, []byte)
		req       Request
		want      want
		phase     Phase
		bodyBytes int64
		detail    string
	}{
		{"interim responses skipped", write("HTTP/1.1 100 Continue\r\n\r\n" +
			"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n" +
			"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nvigil-ok"),
			Request{ExpectedBody: "vigil-ok"}, want{true, OK, 200}, "", 8, "200"},
		{"chunked body, text across chunks", write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"4\r\nvigi\r\n4\r\nl-ok\r\n0\r\n\r\n"),
			Request{ExpectedBody: "vigil-ok"}, want{true, OK, 200}, "", 8, "200"},
		{"body until close", write("HTTP/1.0 200 OK\r\n\r\nhello"),
			Request{}, want{true, OK, 200}, "", 5, "200"},
		{"truncated body", write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789"),
			Request{}, want{false, ConnectFailed, 200}, PhaseBody, 10, "end of the body"},
		{"truncated chunked body", write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n01234"),
			Request{}, want{false, ConnectFailed, 200}, PhaseBody, 5, "end of the body"},
		{"headers too large", write("HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("b", 300<<10) + "\r\n\r\n"),
			Request{}, want{false, ConnectFailed, 0}, PhaseHeaders, 0, "headers larger"},
		{"endless interim responses", func(c net.Conn, _ []byte) {
			for {
				if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
					return
				}
			}
		}, Request{}, want{false, ConnectFailed, 0}, PhaseHeaders, 0, "headers larger"},
		{"not HTTP", write("SSH-2.0-OpenSSH_9.6\r\n"),
			Request{}, want{false, ConnectFailed, 0}, PhaseHeaders, 0, "malformed"},
		{"closed before answering", write(""),
			Request{}, want{false, ConnectFailed, 0}, PhaseHeaders, 0, "closed by origin"},
		{"endless chunked body stops at the cap", func(c net.Conn, _ []byte) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
			chunk := "8000\r\n" + strings.Repeat("z", 0x8000) + "\r\n"
			for {
				if _, err := io.WriteString(c, chunk); err != nil {
					return
				}
			}
		}, Request{MaxBody: 100 << 10}, want{true, OK, 200}, "", 100 << 10, "200"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Address, req.Host, req.Timeout = "http://"+rawOrigin(t, tc.serve, false), siteHost, 5*time.Second
			got, err := Do(context.Background(), req)
			check(t, got, err, tc.want)
			if got.Phase != tc.phase || got.BodyBytes != tc.bodyBytes || !strings.Contains(got.Detail, tc.detail) {
				t.Errorf("phase %q, body %d bytes, detail %q; want %q, %d, mentioning %q",
					got.Phase, got.BodyBytes, got.Detail, tc.phase, tc.bodyBytes, tc.detail)
			}
		})
	}

	t.Run("request as sent", func(t *testing.T) {
		heads := make(chan string, 1)
		addr := rawOrigin(t, func(c net.Conn, head []byte) {
			heads <- string(head)
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}, false)
		got, err := Do(context.Background(), Request{
			Address: "http://" + addr, Host: siteHost, Path: "/raw?q=1",
			Header: http.Header{"X-B": {"2"}, "X-A": {"1", "3"}},
		})
		check(t, got, err, want{true, OK, 204})
		wantHead := "GET /raw?q=1 HTTP/1.1\r\nHost: site.example\r\nUser-Agent: " + DefaultUserAgent + "\r\n" +
			"X-A: 1\r\nX-A: 3\r\nX-B: 2\r\nConnection: close\r\n\r\n"
		if head := <-heads; head != wantHead {
			t.Fatalf("request head\n%q\nwant\n%q", head, wantHead)
		}
	})
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
	for _, path := range []string{"/hang", "/stall"} {
		t.Run("caller deadline before the probe timeout, "+path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			t.Cleanup(cancel)
			_, err := Do(ctx, Request{Address: o.url, Path: path, Timeout: time.Minute})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got error %v, want context.DeadlineExceeded", err)
			}
		})
	}
}

func TestDoInvalidRequest(t *testing.T) {
	const addr = "http://origin.example"
	hdr := func(k, v string) http.Header { return http.Header{k: {v}} }
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
		{"relative path", Request{Address: addr, Path: "health"}, `start with "/"`},
		{"path with space", Request{Address: addr, Path: "/a b?token=s3cret"}, "spaces"},
		{"path with fragment", Request{Address: addr, Path: "/a#b"}, "fragment"},
		{"host with port", Request{Address: addr, Host: "site.example:443"}, "without a port"},
		{"host with path", Request{Address: addr, Host: "site.example/x"}, "bare hostname"},
		{"server name with port", Request{Address: addr, ServerName: "origin.example:443"}, "server name"},
		{"server name with path", Request{Address: addr, ServerName: "origin.example/x"}, "server name"},
		{"user agent with newline", Request{Address: addr, UserAgent: "a\r\nX-Evil: 1"}, "user agent"},
		{"negative timeout", Request{Address: addr, Timeout: -time.Second}, "timeout"},
		{"negative max latency", Request{Address: addr, MaxLatency: -1}, "max latency"},
		{"negative max body", Request{Address: addr, MaxBody: -1}, "max body"},
		{"bad expected status", Request{Address: addr, ExpectedStatuses: []int{200, 42}}, "42"},
		{"expected body too long", Request{Address: addr, ExpectedBody: strings.Repeat("x", MaxExpectedBody+1)}, "longer"},
		{"expected body longer than max body", Request{Address: addr, MaxBody: 4, ExpectedBody: "vigil"}, "MaxBody"},
		{"header Host", Request{Address: addr, Header: hdr("Host", "evil.example")}, "Host"},
		{"header host in lower case", Request{Address: addr, Header: hdr("host", "evil.example")}, "Host"},
		{"header User-Agent", Request{Address: addr, Header: hdr("User-Agent", "x")}, "UserAgent"},
		{"header Content-Length", Request{Address: addr, Header: hdr("Content-Length", "5")}, "Content-Length"},
		{"header Transfer-Encoding", Request{Address: addr, Header: hdr("Transfer-Encoding", "chunked")}, "Transfer-Encoding"},
		{"header Connection", Request{Address: addr, Header: hdr("Connection", "keep-alive")}, "Connection"},
		{"header Upgrade", Request{Address: addr, Header: hdr("Upgrade", "h2c")}, "Upgrade"},
		{"header TE", Request{Address: addr, Header: hdr("TE", "trailers")}, "Te"},
		{"header Keep-Alive", Request{Address: addr, Header: hdr("Keep-Alive", "300")}, "Keep-Alive"},
		{"header Proxy-Connection", Request{Address: addr, Header: hdr("Proxy-Connection", "close")}, "Proxy-Connection"},
		{"header name with space", Request{Address: addr, Header: hdr("X Token", "s3cret")}, "token"},
		{"header name empty", Request{Address: addr, Header: hdr("", "s3cret")}, "token"},
		{"header name pseudo", Request{Address: addr, Header: hdr(":authority", "evil.example")}, "token"},
		{"header value with newline", Request{Address: addr, Header: hdr("X-Token", "s3cret\r\nX-Evil: 1")}, "control characters"},
		{"header value with NUL", Request{Address: addr, Header: hdr("Authorization", "Bearer s3cret\x00")}, "Authorization"},
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
		{Address: "https://203.0.113.10", Host: "site.example", ServerName: "origin-a.internal"},
		{Address: "http://origin.example", MaxBody: 1, ExpectedBody: "x"},
		{Address: "http://origin.example", Header: http.Header{"Authorization": {"Bearer x"}, "X-Tab": {"a\tb"}, "Accept": nil}},
	}
	for _, r := range valid {
		if err := r.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", r, err)
		}
	}
}

func TestBodyContainsAcrossReads(t *testing.T) {
	body := strings.Repeat("a", 1000) + "needle" + strings.Repeat("b", 1000)
	// A text straddling the read buffer's end, found only by carrying the
	// end of one read into the next.
	straddle := strings.Repeat("a", bodyBufSize-3) + "needle" + strings.Repeat("b", bodyBufSize)
	long := strings.Repeat("n", bodyBufSize) + "!" // longer than half the buffer
	longStraddle := strings.Repeat("a", bodyBufSize-100) + long + strings.Repeat("b", 3*bodyBufSize)
	cases := []struct {
		name  string
		r     io.Reader
		text  string
		limit int64
		want  bool
		read  int64
	}{
		{"one byte reads", iotest.OneByteReader(strings.NewReader(body)), "needle", 1 << 20, true, int64(len(body))},
		{"half reads", iotest.HalfReader(strings.NewReader(body)), "needle", 1 << 20, true, int64(len(body))},
		{"missing", iotest.OneByteReader(strings.NewReader(body)), "pin", 1 << 20, false, int64(len(body))},
		{"no text: reads it all", strings.NewReader(body), "", 1 << 20, true, int64(len(body))},
		{"across the buffer's end", strings.NewReader(straddle), "needle", 1 << 20, true, int64(len(straddle))},
		{"long text across the buffer's end", strings.NewReader(longStraddle), long, 1 << 20, true, int64(len(longStraddle))},
		{"at the very end of the cap", strings.NewReader(strings.Repeat("a", 4093) + "end"), "end", 4096, true, 4096},
		{"just past the cap", strings.NewReader(strings.Repeat("a", 4094) + "end"), "end", 4096, false, 4096},
		{"cap far below the body", strings.NewReader(straddle), "", 10, true, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, got, err := readBody(tc.r, tc.text, tc.limit)
			if err != nil || got != tc.want || n != tc.read {
				t.Fatalf("readBody = %d, %v, %v; want %d, %v, nil", n, got, err, tc.read, tc.want)
			}
		})
	}
	t.Run("read error", func(t *testing.T) {
		boom := errors.New("boom")
		_, _, err := readBody(iotest.ErrReader(boom), "x", 1<<20)
		if !errors.Is(err, boom) {
			t.Fatalf("got %v, want %v", err, boom)
		}
	})
	t.Run("read error after the text", func(t *testing.T) {
		boom := errors.New("boom")
		n, found, err := readBody(io.MultiReader(strings.NewReader("vigil-ok"), iotest.ErrReader(boom)), "vigil-ok", 1<<20)
		if !errors.Is(err, boom) || !found || n != 8 {
			t.Fatalf("got %d, %v, %v; want 8, true, %v: the body must be read to its end", n, found, err, boom)
		}
	})
}

// TestCallerDeadlineIsNeverADown: probes whose caller's deadline passes
// while they wait (a black-holed origin, a hung DNS lookup's stand-in)
// return an error, never a down, however close the deadlines fall.
func TestCallerDeadlineIsNeverADown(t *testing.T) {
	address := sdktest.BlackHole(t)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(5+i%20)*time.Millisecond)
			defer cancel()
			res, err := Do(ctx, Request{Address: address, Timeout: time.Second})
			if err == nil {
				t.Errorf("the caller's deadline gave a vote: %+v", res)
			}
		})
	}
	wg.Wait()
}
