package probe

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"time"
)

// dialer opens every probe connection. The probe context bounds it. Tests
// may give it another Resolver (see export_test.go).
var dialer = &net.Dialer{KeepAlive: -1}

// alpn is the ALPN list offered to https origins.
var alpn = []string{"h2", "http/1.1"}

// aLongTimeAgo is a deadline in the past: setting it makes every pending and
// future read or write on a connection fail at once.
var aLongTimeAgo = time.Unix(1, 0)

// exchange is one request and its response on one new connection, which it
// owns. close releases everything.
type exchange struct {
	conn     net.Conn
	stop     func() bool // unregisters the context watch on conn
	resp     *http.Response
	br       *bufio.Reader    // HTTP/1: pooled, returned by close
	h2       *http.ClientConn // HTTP/2
	released bool
}

func (ex *exchange) close() {
	if ex.released {
		return
	}
	ex.released = true
	if ex.h2 != nil {
		if ex.resp != nil {
			ex.resp.Body.Close()
		}
		ex.h2.Close()
	}
	ex.stop()
	ex.conn.Close()
	if ex.br != nil {
		ex.br.Reset(nil)
		readers.Put(ex.br)
	}
}

// exchange opens a new connection to the origin, sends the request for u
// and reads the response headers. On success the caller reads the body, if
// it wants it, and closes ex.
func (p *prober) exchange(u *url.URL) (ex *exchange, err error) {
	p.proto = ""
	conn, err := p.dial()
	if err != nil {
		return nil, err
	}
	// Once the probe context ends, every read and write on conn fails at
	// once: the TLS handshake, HTTP/1 and HTTP/2 all run on it.
	stop := context.AfterFunc(p.ctx, func() { conn.SetDeadline(aLongTimeAgo) })
	ex = &exchange{conn: conn, stop: stop}
	defer func() {
		if err != nil {
			ex.close()
			ex = nil
		}
	}()

	if p.t.url.Scheme == "https" {
		p.setPhase(phaseTLS)
		tc := tls.Client(conn, &tls.Config{
			ServerName:         p.t.serverName,
			RootCAs:            p.t.rootCAs,
			InsecureSkipVerify: p.t.insecureSkipVerify,
			NextProtos:         alpn,
			MinVersion:         tls.VersionTLS12,
		})
		ex.conn = tc
		if err := tc.Handshake(); err != nil {
			if isConnError(err) || p.ctx.Err() != nil {
				return ex, err
			}
			return ex, &tlsError{err}
		}
		if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
			p.leaf = pc[0]
		}
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			p.setPhase(phaseHeaders)
			p.proto = "HTTP/2.0"
			return ex, p.roundTripH2(ex, tc, u)
		}
	}
	p.setPhase(phaseHeaders)
	p.proto = "HTTP/1.1"
	return ex, p.roundTripH1(ex, u)
}

// dial connects to the origin's address, noting when the DNS lookup is
// over.
func (p *prober) dial() (net.Conn, error) {
	ctx := p.ctx
	if p.t.addrIsIP {
		p.setPhase(phaseConnect)
	} else {
		p.setPhase(phaseDNS)
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			DNSDone: func(info httptrace.DNSDoneInfo) {
				if info.Err == nil {
					p.setPhase(phaseConnect)
				}
			},
		})
	}
	return dialer.DialContext(ctx, "tcp", p.t.dialAddr)
}

// HTTP/1.1: the probe writes the request and reads the response itself, on
// the one connection it dialled, with no transport in between: no
// connection pool, no goroutines, no proxy and no compression.

// readBufSize is the size of the buffered reader under the response; it
// must hold the longest chunk-size line the chunked decoder accepts (4 KiB).
const readBufSize = 4 << 10

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}

var requestBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 512)
	return &b
}}

// errRawLimit is returned by a limitedReader that used up its budget.
var errRawLimit = errors.New("response larger than the probe reads")

// errHeadersTooLarge reports response headers over maxHeaderBytes.
var errHeadersTooLarge = errors.New("response headers larger than 256 KiB")

// limitedReader reads from a connection within a byte budget: the response
// headers (interim 1xx responses included) get maxHeaderBytes, and then the
// body gets its cap plus room for its framing (chunk sizes, trailers).
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.left <= 0 {
		return 0, errRawLimit
	}
	if int64(len(b)) > l.left {
		b = b[:l.left]
	}
	n, err := l.r.Read(b)
	l.left -= int64(n)
	return n, err
}

func (p *prober) roundTripH1(ex *exchange, u *url.URL) error {
	bp := requestBufs.Get().(*[]byte)
	b := p.t.appendRequest((*bp)[:0], u)
	_, err := ex.conn.Write(b)
	*bp = b
	requestBufs.Put(bp)
	if err != nil {
		return err
	}

	lr := &limitedReader{r: ex.conn, left: maxHeaderBytes}
	ex.br = readers.Get().(*bufio.Reader)
	ex.br.Reset(lr)
	for {
		resp, err := http.ReadResponse(ex.br, nil)
		if err != nil {
			if errors.Is(err, errRawLimit) {
				return errHeadersTooLarge
			}
			return err
		}
		// Interim responses (100 Continue, 103 Early Hints) come before
		// the real one and have no body; 101 would be final, but a probe
		// never asks to switch protocols.
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		ex.resp = resp
		lr.left = p.t.maxBody + maxHeaderBytes
		p.proto = resp.Proto
		return nil
	}
}

// appendRequest appends the HTTP/1.1 request for u to b.
func (t *target) appendRequest(b []byte, u *url.URL) []byte {
	b = append(b, "GET "...)
	b = append(b, u.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, t.hostHeader...)
	b = append(b, "\r\nUser-Agent: "...)
	b = append(b, t.userAgent...)
	b = append(b, "\r\n"...)
	for _, k := range t.headerKeys {
		for _, v := range t.header[k] {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	return append(b, "Connection: close\r\n\r\n"...)
}

// HTTP/2: the connection the probe dialled is handed to net/http's HTTP/2
// client as a single client connection, which is never pooled.

// h2Transport makes HTTP/2 client connections out of the TLS connections
// probes hand it (handOver); it never dials, pools or proxies.
var h2Transport = &http.Transport{
	Proxy:                  nil,
	DialTLSContext:         handOver,
	DisableKeepAlives:      true,
	DisableCompression:     true,
	MaxResponseHeaderBytes: maxHeaderBytes,
	Protocols:              h2Only(),
}

func h2Only() *http.Protocols {
	var p http.Protocols
	p.SetHTTP2(true)
	return &p
}

// handOverKey is the context key of the connection handOver returns.
type handOverKey struct{}

var errNoProbe = errors.New("probe transport used outside probe.Do")

func handOver(ctx context.Context, _, _ string) (net.Conn, error) {
	c, _ := ctx.Value(handOverKey{}).(*tls.Conn)
	if c == nil {
		return nil, errNoProbe
	}
	return c, nil
}

func (p *prober) roundTripH2(ex *exchange, tc *tls.Conn, u *url.URL) error {
	cc, err := h2Transport.NewClientConn(context.WithValue(p.ctx, handOverKey{}, tc), "https", p.t.dialAddr)
	if err != nil {
		return err
	}
	ex.h2 = cc
	header := make(http.Header, len(p.t.header)+1)
	for k, vs := range p.t.header {
		header[k] = vs
	}
	header["User-Agent"] = []string{p.t.userAgent}
	req := (&http.Request{
		Method:     http.MethodGet,
		URL:        &url.URL{Scheme: "https", Host: p.t.dialAddr, Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery},
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     header,
		Host:       p.t.hostHeader,
	}).WithContext(p.ctx)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return err
	}
	ex.resp = resp
	p.proto = resp.Proto
	return nil
}

// tlsError marks a failed TLS handshake.
type tlsError struct{ err error }

func (e *tlsError) Error() string { return e.err.Error() }
func (e *tlsError) Unwrap() error { return e.err }
