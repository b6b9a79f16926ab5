package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultTimeout is the probe timeout used when [Request.Timeout] is zero.
const DefaultTimeout = 5 * time.Second

// DefaultUserAgent is the User-Agent header sent when [Request.UserAgent] is
// empty.
const DefaultUserAgent = "cdnca-control-api/origin-probe"

// DefaultPath is the health check path used when [Request.Path] is empty.
const DefaultPath = "/"

// BodyLimit is the most bytes of a response body a probe reads. The body is
// only read when [Request.ExpectedBody] is set; the expected text must then
// appear within the first BodyLimit bytes.
const BodyLimit = 64 << 10

// maxHeaderBytes bounds the response headers a probe accepts.
const maxHeaderBytes = 256 << 10

// ErrInvalidRequest is wrapped by every error [Do] and [Request.Validate]
// return for a request that cannot be probed (a bad Address, Host, Path or
// limit). Test for it with errors.Is.
var ErrInvalidRequest = errors.New("invalid probe request")

// Reason says why a probe came out up or down. Its values are stable short
// snake_case words, fit for logs, metrics labels and the wire.
type Reason string

// The reasons a [Result] can carry. OK is the only one that goes with
// Result.Up == true.
const (
	// OK: the origin answered with a status below 500 and passed every
	// stricter check that was set.
	OK Reason = "ok"
	// HTTP5xx: the origin answered with a status of 500 or more.
	HTTP5xx Reason = "http_5xx"
	// ConnectFailed: no usable HTTP exchange took place: the DNS lookup
	// failed, the connection was refused, reset or unreachable, or the
	// origin closed the connection or answered something that is not HTTP.
	ConnectFailed Reason = "connect_failed"
	// TLSFailed: the TLS handshake failed, including every certificate
	// verification failure (unknown authority or self-signed, expired, not
	// valid for Host).
	TLSFailed Reason = "tls_failed"
	// Timeout: the response headers (or, with a body check, the body) did
	// not arrive within the request's timeout.
	Timeout Reason = "timeout"
	// UnexpectedStatus: the status was below 500 but not one of
	// Request.ExpectedStatuses.
	UnexpectedStatus Reason = "unexpected_status"
	// BodyMismatch: Request.ExpectedBody was not found in the first
	// BodyLimit bytes of the body.
	BodyMismatch Reason = "body_mismatch"
	// TooSlow: the response headers arrived later than Request.MaxLatency.
	TooSlow Reason = "too_slow"
)

// Request describes one probe. Only Address is required; every other field
// has a default or is an opt-in check. A Request is read, never modified, by
// [Do], so one value may be shared by concurrent probes.
type Request struct {
	// Address is the origin to connect to: "http://" or "https://", a
	// hostname or IP address, and an optional port, with no path, query or
	// credentials. For example "https://203.0.113.10:8443" or
	// "http://origin-a.example.net".
	Address string

	// Host is the site's hostname (no port). It is sent as the Host header
	// and, for https, as the TLS server name (SNI) and the name the origin's
	// certificate must be valid for, even though the connection goes to
	// Address. Empty means Address's host.
	Host string

	// Path is the health check path, starting with "/", optionally with a
	// query string. Empty means "/".
	Path string

	// Timeout bounds the whole probe: DNS lookup, connect, TLS handshake and
	// response headers, and the body read when ExpectedBody is set. Zero
	// means DefaultTimeout.
	Timeout time.Duration

	// UserAgent is the User-Agent header. Empty means DefaultUserAgent.
	UserAgent string

	// ExpectedStatuses, when not empty, lists the statuses that count as up.
	// Any other status below 500 is down with UnexpectedStatus. A 5xx is
	// always down with HTTP5xx, even when listed here.
	ExpectedStatuses []int

	// ExpectedBody, when not empty, is text that must appear in the first
	// BodyLimit bytes of the response body; otherwise the probe is down with
	// BodyMismatch. Setting it makes the probe read the body, within Timeout.
	ExpectedBody string

	// MaxLatency, when positive, is the longest the response headers may
	// take to arrive, counted from the start of the probe (DNS and connect
	// included). Slower answers are down with TooSlow.
	MaxLatency time.Duration

	// RootCAs, when not nil, replaces the system roots for verifying the
	// origin's certificate: for origins behind a private CA, and for tests.
	RootCAs *x509.CertPool

	// InsecureSkipVerify turns certificate verification off: any
	// certificate is accepted and TLSFailed only reports handshake errors.
	// Meant for tests; an operator who sets it loses the certificate check.
	InsecureSkipVerify bool
}

// Result is the outcome of one probe.
type Result struct {
	// Up is the probe's vote: true for up, false for down.
	Up bool
	// Reason says why. It is OK exactly when Up is true.
	Reason Reason
	// Status is the HTTP status code, or 0 when no response arrived.
	Status int
	// Latency is the time from the start of the probe until the response
	// headers arrived, or until the probe failed.
	Latency time.Duration
	// Detail is a short human explanation, such as "HTTP 503" or
	// "connection refused". It never contains the request path, query or
	// any credential, so it is safe to log and show to operators.
	Detail string
}

// Validate reports whether r can be probed. The error wraps
// [ErrInvalidRequest] and says what is wrong. [Do] calls it itself; a source
// may call it earlier, for example when a ballot arrives.
func (r *Request) Validate() error {
	_, err := r.prepare()
	return err
}

// Do runs one probe and returns its result.
//
// The error is not nil only when the probe did not run to a verdict: the
// request is invalid (the error wraps [ErrInvalidRequest]) or ctx ended
// before the probe's own timeout did (the error wraps ctx's cause). In both
// cases the origin has not been judged and the Result must not be used as a
// vote. Give ctx a deadline later than Request.Timeout, or none, so that a
// slow origin comes out as a Timeout result rather than an error.
//
// Do is safe for concurrent use.
func Do(ctx context.Context, req Request) (Result, error) {
	t, err := req.prepare()
	if err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("probe not run: %w", context.Cause(ctx))
	}

	pctx, cancel := context.WithTimeoutCause(ctx, t.timeout, errTimedOut)
	defer cancel()

	state := &dialState{ctx: pctx}
	if t.url.Scheme == "https" {
		state.tls = &tls.Config{
			ServerName:         t.serverName,
			RootCAs:            req.RootCAs,
			InsecureSkipVerify: req.InsecureSkipVerify,
			NextProtos:         http11,
			MinVersion:         tls.VersionTLS12,
		}
	}
	hreq := (&http.Request{
		Method:     http.MethodGet,
		URL:        t.url,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     t.header,
		Host:       t.hostHeader,
	}).WithContext(context.WithValue(pctx, dialStateKey{}, state))

	start := time.Now()
	resp, err := transport.RoundTrip(hreq)
	latency := time.Since(start)
	if err != nil {
		return failed(pctx, err, latency, t.timeout, "response")
	}
	defer resp.Body.Close()

	res := Result{Status: resp.StatusCode, Latency: latency}
	switch {
	case resp.StatusCode >= 500:
		res.Reason, res.Detail = HTTP5xx, statusDetail(resp.StatusCode)
		return res, nil
	case len(req.ExpectedStatuses) > 0 && !containsInt(req.ExpectedStatuses, resp.StatusCode):
		res.Reason = UnexpectedStatus
		res.Detail = fmt.Sprintf("HTTP %d, expected one of %v", resp.StatusCode, req.ExpectedStatuses)
		return res, nil
	case req.MaxLatency > 0 && latency > req.MaxLatency:
		res.Reason = TooSlow
		res.Detail = fmt.Sprintf("headers after %v, limit %v", latency.Round(time.Microsecond), req.MaxLatency)
		return res, nil
	}
	if req.ExpectedBody != "" {
		found, err := bodyContains(resp.Body, req.ExpectedBody)
		if err != nil {
			r, err := failed(pctx, err, latency, t.timeout, "complete body")
			r.Status = resp.StatusCode
			return r, err
		}
		if !found {
			res.Reason = BodyMismatch
			res.Detail = "expected text not in the first 64 KiB of the body"
			return res, nil
		}
	}
	res.Up, res.Reason, res.Detail = true, OK, statusDetail(resp.StatusCode)
	return res, nil
}

// errTimedOut is the cause of a probe context that hit Request.Timeout, which
// tells it apart from the caller's own context ending.
var errTimedOut = errors.New("probe timeout")

// http11 is the ALPN list offered to https origins: probes speak HTTP/1.1.
var http11 = []string{"http/1.1"}

// defaultHeader is shared, read only, by every probe with the default
// User-Agent (the transport never writes to a request's header).
var defaultHeader = http.Header{"User-Agent": {DefaultUserAgent}}

// dialer opens every probe connection. The probe context bounds it.
var dialer = net.Dialer{KeepAlive: -1}

// transport is shared by all probes. It keeps no idle connections
// (DisableKeepAlives), never uses a proxy, asks for no compression, speaks
// HTTP/1.1 only, and dials through dialPlain and dialTLS, which take the
// probe's own context and TLS settings from the request context.
var transport = &http.Transport{
	Proxy:                  nil,
	DialContext:            dialPlain,
	DialTLSContext:         dialTLS,
	DisableKeepAlives:      true,
	DisableCompression:     true,
	MaxResponseHeaderBytes: maxHeaderBytes,
	TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
}

// dialStateKey is the request context key of a probe's *dialState.
type dialStateKey struct{}

// dialState carries a probe's own context and TLS settings to the dial
// functions. net/http dials with a context detached from the request's
// cancellation (a dial may outlive its request to serve the next one), so the
// probe context rides along as a value and bounds the dial itself: no dial
// outlives its probe.
type dialState struct {
	ctx context.Context
	tls *tls.Config
}

// tlsError marks a failed TLS handshake.
type tlsError struct{ err error }

func (e *tlsError) Error() string { return e.err.Error() }
func (e *tlsError) Unwrap() error { return e.err }

var errNoProbe = errors.New("probe transport used outside probe.Do")

func dialPlain(ctx context.Context, network, addr string) (net.Conn, error) {
	st, _ := ctx.Value(dialStateKey{}).(*dialState)
	if st == nil {
		return nil, errNoProbe
	}
	return dialer.DialContext(st.ctx, network, addr)
}

func dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	st, _ := ctx.Value(dialStateKey{}).(*dialState)
	if st == nil || st.tls == nil {
		return nil, errNoProbe
	}
	raw, err := dialer.DialContext(st.ctx, network, addr)
	if err != nil {
		return nil, err
	}
	conn := tls.Client(raw, st.tls)
	if err := conn.HandshakeContext(st.ctx); err != nil {
		raw.Close()
		if isConnError(err) {
			return nil, err
		}
		return nil, &tlsError{err}
	}
	return conn, nil
}

// failed turns a transport or body read error into a down result, or into an
// error when the caller's context ended first.
func failed(pctx context.Context, err error, latency, timeout time.Duration, waitingFor string) (Result, error) {
	if pctx.Err() != nil {
		cause := context.Cause(pctx)
		if cause != errTimedOut {
			return Result{}, fmt.Errorf("probe interrupted: %w", cause)
		}
		return Result{Reason: Timeout, Latency: latency, Detail: "no " + waitingFor + " within " + timeout.String()}, nil
	}
	var te *tlsError
	if errors.As(err, &te) {
		return Result{Reason: TLSFailed, Latency: latency, Detail: shorten(te.err.Error())}, nil
	}
	return Result{Reason: ConnectFailed, Latency: latency, Detail: connectDetail(err)}, nil
}

// bodyContains reads at most BodyLimit bytes of body and reports whether
// want appears in them. It stops reading as soon as want is found.
func bodyContains(body io.Reader, want string) (bool, error) {
	bp := bodyBufs.Get().(*[]byte)
	defer bodyBufs.Put(bp)
	buf := (*bp)[:BodyLimit]
	needle := []byte(want)
	n := 0
	for n < len(buf) {
		m, err := body.Read(buf[n:])
		if m > 0 {
			from := max(0, n-len(needle)+1)
			n += m
			if bytes.Contains(buf[from:n], needle) {
				return true, nil
			}
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

var bodyBufs = sync.Pool{New: func() any {
	b := make([]byte, BodyLimit)
	return &b
}}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func statusDetail(code int) string {
	if text := http.StatusText(code); text != "" {
		return "HTTP " + strconv.Itoa(code) + " " + text
	}
	return "HTTP " + strconv.Itoa(code)
}

// shorten keeps details short: a detail is a hint for a human, not a dump.
func shorten(s string) string {
	const limit = 200
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}

// target is a validated request, ready to send.
type target struct {
	url        *url.URL
	hostHeader string
	serverName string
	header     http.Header
	timeout    time.Duration
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
}

// prepare validates r and computes what Do sends. Its errors never quote the
// Address or Path in full: they may carry credentials or tokens.
func (r *Request) prepare() (target, error) {
	var t target
	if r.Address == "" {
		return t, invalid("address is empty; want scheme://host[:port], for example https://203.0.113.10")
	}
	u, err := url.Parse(r.Address)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url.Error quotes the whole address
		}
		return t, invalid("address is not a URL (%v); want scheme://host[:port]", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		if u.Scheme == "" {
			return t, invalid("address has no scheme; want http:// or https:// before the host")
		}
		return t, invalid("address scheme %q is not http or https", u.Scheme)
	case u.User != nil:
		return t, invalid("address must not carry credentials (user:password@)")
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return t, invalid("address has no host; want %s://host[:port]", u.Scheme)
	case u.Path != "" && u.Path != "/" || u.RawPath != "":
		return t, invalid("address must not have a path; put the health check path in Path")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(r.Address, "#"):
		return t, invalid("address must not have a query or fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return t, invalid("address port %q is not a number from 1 to 65535", p)
		}
	}

	path := r.Path
	if path == "" {
		path = DefaultPath
	}
	if path[0] != '/' {
		return t, invalid("path must start with \"/\"")
	}
	if strings.ContainsAny(path, "# \t\r\n") || hasCtl(path) {
		return t, invalid("path must not contain spaces, control characters or a fragment (#)")
	}
	pu, err := url.ParseRequestURI(path)
	if err != nil {
		return t, invalid("path is not a valid request path")
	}
	t.url = &url.URL{
		Scheme:   u.Scheme,
		Host:     u.Host,
		Path:     pu.Path,
		RawPath:  pu.RawPath,
		RawQuery: pu.RawQuery,
	}

	host := r.Host
	if host == "" {
		host = u.Hostname()
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.ContainsAny(host, "/\\?#@[] \t%") || hasCtl(host) {
		return t, invalid("host %q is not a bare hostname", host)
	}
	t.serverName, t.hostHeader = host, host
	if strings.Contains(host, ":") {
		if ip := net.ParseIP(host); ip == nil {
			return t, invalid("host %q is not a bare hostname: give it without a port", host)
		}
		t.hostHeader = "[" + host + "]"
	}

	switch {
	case r.UserAgent == "":
		t.header = defaultHeader
	case hasCtl(r.UserAgent):
		return t, invalid("user agent contains control characters")
	default:
		t.header = http.Header{"User-Agent": {r.UserAgent}}
	}

	t.timeout = r.Timeout
	switch {
	case r.Timeout < 0:
		return t, invalid("timeout %v is negative", r.Timeout)
	case r.Timeout == 0:
		t.timeout = DefaultTimeout
	}
	if r.MaxLatency < 0 {
		return t, invalid("max latency %v is negative", r.MaxLatency)
	}
	for _, s := range r.ExpectedStatuses {
		if s < 100 || s > 599 {
			return t, invalid("expected status %d is not an HTTP status (100-599)", s)
		}
	}
	if len(r.ExpectedBody) > BodyLimit {
		return t, invalid("expected body text is %d bytes, longer than the %d bytes a probe reads", len(r.ExpectedBody), BodyLimit)
	}
	return t, nil
}

func hasCtl(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}
