package probe

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/vigilcdn/vigil/sdk"
)

// DefaultTimeout is the probe timeout used when [Request.Timeout] is zero.
const DefaultTimeout = 5 * time.Second

// DefaultUserAgent is the User-Agent header sent when [Request.UserAgent] is
// empty.
const DefaultUserAgent = "cdnca-control-api/origin-probe"

// DefaultPath is the health check path used when [Request.Path] is empty.
const DefaultPath = "/"

// DefaultMaxBody is the most bytes of a response body a probe reads when
// [Request.MaxBody] is zero: 1 MiB, far more than any health check page
// needs, little enough that probing many origins often costs little
// bandwidth. A longer body is not an error: the probe stops reading at the
// cap and judges on what it has read.
const DefaultMaxBody = 1 << 20

// MaxExpectedBody is the longest [Request.ExpectedBody] text accepted.
const MaxExpectedBody = 64 << 10

// BodyLimit is the longest [Request.ExpectedBody] text accepted.
//
// Deprecated: a probe now reads the body up to [Request.MaxBody]
// ([DefaultMaxBody] by default), not BodyLimit bytes. Use [MaxExpectedBody],
// which has the same value, for the limit on the expected text.
const BodyLimit = MaxExpectedBody

// MaxRedirects is the most redirects a probe follows when
// [Request.FollowRedirects] is set. One more is down with TooManyRedirects.
const MaxRedirects = 10

// maxHeaderBytes bounds the response headers a probe accepts.
const maxHeaderBytes = 256 << 10

// ErrInvalidRequest is wrapped by every error [Do] and [Request.Validate]
// return for a request that cannot be probed (a bad Address, Host, Path,
// header or limit). Test for it with errors.Is.
var ErrInvalidRequest = errors.New("invalid probe request")

// Phase names the stage of a probe: the one under way when it failed, or the
// one at which it was judged down. Its values are stable short words, fit
// for logs and metrics labels.
type Phase string

// The stages of a probe, in order. A request to a host name starts with
// PhaseDNS; one to an IP address starts with PhaseConnect.
const (
	// PhaseDNS: looking up Address's host name.
	PhaseDNS Phase = "dns"
	// PhaseConnect: opening the TCP connection.
	PhaseConnect Phase = "connect"
	// PhaseTLS: the TLS handshake, certificate check included.
	PhaseTLS Phase = "tls"
	// PhaseHeaders: sending the request and waiting for the response
	// headers. Verdicts on the headers (HTTP5xx, UnexpectedStatus, TooSlow,
	// redirects) carry this phase.
	PhaseHeaders Phase = "headers"
	// PhaseBody: reading the response body.
	PhaseBody Phase = "body"
)

// Request describes one probe. Only Address is required; every other field
// has a default or is an opt-in setting. A Request is read, never modified,
// by [Do], so one value may be shared by concurrent probes.
type Request struct {
	// Address is the origin to connect to: "http://" or "https://", a
	// hostname or IP address, and an optional port, with no path, query or
	// credentials. For example "https://203.0.113.10:8443" or
	// "http://origin-a.example.net".
	Address string

	// Host is the site's hostname (no port). It is sent as the Host header
	// and, for https, as the TLS server name (SNI) and the name the origin's
	// certificate must be valid for (unless ServerName is set), even though
	// the connection goes to Address. Empty means Address's host.
	Host string

	// Path is the health check path, starting with "/", optionally with a
	// query string. Empty means "/".
	Path string

	// Timeout bounds the whole probe: DNS lookup, connect, TLS handshake,
	// response headers and the body up to MaxBody, and every redirect
	// followed. Zero means DefaultTimeout.
	Timeout time.Duration

	// UserAgent is the User-Agent header. Empty means DefaultUserAgent.
	UserAgent string

	// Header holds extra request headers, sent as given, for example an
	// Authorization or Cookie an origin asks of health checks. Their values
	// never appear in errors or in Result.Detail. The probe's own headers
	// cannot be set here: Host (use Host), User-Agent (use UserAgent), and
	// the framing headers Content-Length, Transfer-Encoding, Connection,
	// Upgrade, Te, Keep-Alive and Proxy-Connection are refused as invalid,
	// as are names that are not HTTP tokens and values with control
	// characters. An Accept-Encoding set here is sent, but the body is
	// never decoded: ExpectedBody is matched against the bytes as sent.
	Header http.Header

	// ExpectedStatuses, when not empty, lists the statuses that count as up.
	// Any other status below 500 is down with UnexpectedStatus. A 5xx is
	// always down with HTTP5xx, even when listed here.
	ExpectedStatuses []int

	// ExpectedBody, when not empty, is text that must appear in the
	// response body (in its first MaxBody bytes when it is longer);
	// otherwise the probe is down with BodyMismatch. It may be at most
	// MaxExpectedBody bytes, and no longer than MaxBody.
	ExpectedBody string

	// MaxBody is the most bytes of the body a probe reads. A longer body is
	// fine: the probe stops at MaxBody, closes the connection and judges on
	// what it read. Zero means DefaultMaxBody; negative is invalid.
	MaxBody int64

	// MaxLatency, when positive, is the longest the response headers may
	// take to arrive, counted from the start of the probe (DNS, connect and
	// any redirects followed included). Slower answers are down with
	// TooSlow.
	MaxLatency time.Duration

	// FollowRedirects, when set, follows redirects (301, 302, 303, 307,
	// 308) that stay on the origin: same scheme, same port, and a host
	// that is Host or Address's host. Each one is a new connection to
	// Address, with the same Host header and the redirect's path, within
	// the same Timeout; the final response is judged. A redirect anywhere
	// else is down with OffHostRedirect, and more than MaxRedirects of them
	// is down with TooManyRedirects. When not set, redirects are not
	// followed and a 3xx is up like any status below 500.
	FollowRedirects bool

	// ServerName, for https, is the TLS server name sent (SNI) and the name
	// the certificate must be valid for, when it is not Host: for an origin
	// whose certificate names the origin rather than the site. The Host
	// header is still Host. Empty means Host.
	ServerName string

	// RootCAs, when not nil, replaces the system roots for verifying the
	// origin's certificate: for origins behind a private CA, and for tests.
	RootCAs *x509.CertPool

	// InsecureSkipVerify TURNS OFF THE CERTIFICATE CHECK: any certificate
	// from anyone is accepted, expired, self-signed or for another name,
	// so an impostor on the path to the origin is voted up. TLSFailed then
	// only reports handshake errors. Meant for tests and emergencies only;
	// for a private CA set RootCAs, for a certificate that does not name
	// the site set ServerName.
	InsecureSkipVerify bool
}

// Result is the outcome of one probe.
type Result struct {
	// Up is the probe's vote: true for up, false for down.
	Up bool
	// Reason says why: the vote's reason as it is, one of the constants of
	// this package (sdk.Reason values). It is OK exactly when Up is true.
	Reason sdk.Reason
	// Phase is the stage at which a down probe failed or was judged, for
	// example PhaseTLS for a handshake timeout. It is empty when Up.
	Phase Phase
	// Status is the HTTP status code of the last response, or 0 when no
	// response arrived.
	Status int
	// Proto is the HTTP protocol spoken: "HTTP/1.1" or "HTTP/2.0" (or
	// "HTTP/1.0" for an origin that answers so). It is empty when the probe
	// failed before a request could be sent.
	Proto string
	// Latency is the time from the start of the probe until the response
	// headers arrived (those of the last response, when redirects are
	// followed), or until the probe failed if they never did.
	Latency time.Duration
	// Duration is the time the whole probe took, body and redirects
	// included.
	Duration time.Duration
	// BodyBytes is how many bytes of the final response's body were read:
	// at most Request.MaxBody.
	BodyBytes int64
	// Detail is a short human explanation, such as "HTTP 503" or
	// "timeout during the TLS handshake (2s)". It never contains the
	// request path, query, header values or any credential, so it is safe
	// to log and show to operators.
	Detail string
	// PeerCertificate is the leaf certificate the origin presented in the
	// TLS handshake of the last exchange (of the last redirect, when they
	// are followed), or nil for plain HTTP or a handshake that failed
	// before the certificate. It is set for an up probe too: a plugin can
	// judge how soon it expires, and vote with a plugin reason of its own
	// (for example Reason "tls_failed" refined by "mycheck/cert_expiring").
	PeerCertificate *x509.Certificate
	// CertNotAfter is PeerCertificate's expiry (zero without one).
	CertNotAfter time.Time
	// Timings is the time the probe spent in each phase, summed over its
	// redirects: what blackbox_exporter reports as
	// probe_http_duration_seconds{phase}. A phase the probe never reached
	// is 0.
	Timings Timings
}

// HTTP is what the probe saw as a vote's structured fields (sdk.Vote's
// HTTP): its status code, the time of each phase and the certificate's
// expiry.
func (r Result) HTTP() *sdk.HTTPProbe {
	return &sdk.HTTPProbe{StatusCode: r.Status,
		Resolve: r.Timings.DNS, Connect: r.Timings.Connect, TLS: r.Timings.TLS,
		Processing: r.Timings.Headers, Transfer: r.Timings.Body, CertNotAfter: r.CertNotAfter}
}

// Timings is the time a probe spent in each phase. Their sum is at most
// Result.Duration (the moments between the phases, such as the start, are
// in none).
type Timings struct {
	// DNS is name resolution (blackbox_exporter's phase "resolve"); 0 for
	// an origin given as an IP address.
	DNS time.Duration
	// Connect is the TCP connection ("connect").
	Connect time.Duration
	// TLS is the TLS handshake ("tls"); 0 for plain HTTP.
	TLS time.Duration
	// Headers is from the end of the handshake (or the connection) to the
	// response headers: the request written and the origin's processing
	// ("processing").
	Headers time.Duration
	// Body is reading the body ("transfer").
	Body time.Duration
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
	// One start for the deadline and the measured times: a timeout is
	// never reported shorter than Timeout.
	start := time.Now()
	pctx, cancel := context.WithDeadlineCause(ctx, start.Add(t.timeout), errTimedOut)
	defer cancel()

	p := &prober{t: &t, ctx: pctx, start: start}
	res, err := p.run()
	if err != nil {
		return Result{}, err
	}
	res.Duration = time.Since(p.start)
	p.setPhase(phaseNone) // closes the last phase's time
	res.Timings = Timings{
		DNS: time.Duration(p.spent[phaseDNS].Load()), Connect: time.Duration(p.spent[phaseConnect].Load()),
		TLS: time.Duration(p.spent[phaseTLS].Load()), Headers: time.Duration(p.spent[phaseHeaders].Load()),
		Body: time.Duration(p.spent[phaseBody].Load()),
	}
	if p.leaf != nil {
		res.PeerCertificate, res.CertNotAfter = p.leaf, p.leaf.NotAfter
	}
	return res, nil
}

// errTimedOut is the cause of a probe context that hit Request.Timeout, which
// tells it apart from the caller's own context ending.
var errTimedOut = errors.New("probe timeout")

// prober is one run of Do.
type prober struct {
	t     *target
	ctx   context.Context // ends at the probe's timeout or with the caller's context
	start time.Time
	phase atomic.Uint32 // index into phases; written by a dial hook too
	// mark is when the current phase began (nanoseconds after start),
	// spent the time of each phase so far (Result.Timings).
	mark  atomic.Int64
	spent [len(phases)]atomic.Int64
	proto string // of the exchange under way, once the request can be sent
	leaf  *x509.Certificate
}

var phases = [...]Phase{"", PhaseDNS, PhaseConnect, PhaseTLS, PhaseHeaders, PhaseBody}

const (
	phaseNone uint32 = iota
	phaseDNS
	phaseConnect
	phaseTLS
	phaseHeaders
	phaseBody
)

// setPhase begins phase ph, adding the time since the last change to the
// phase it ends.
func (p *prober) setPhase(ph uint32) {
	now := int64(time.Since(p.start))
	prev := p.phase.Swap(ph)
	p.spent[prev].Add(now - p.mark.Swap(now))
}

func (p *prober) currentPhase() Phase { return phases[p.phase.Load()] }

// run follows redirects (when asked to) and judges the final response.
func (p *prober) run() (Result, error) {
	u := p.t.url
	for hops := 0; ; hops++ {
		ex, err := p.exchange(u)
		if err != nil {
			res, err := p.failed(err, 0, 0)
			return afterRedirects(res, hops), err
		}
		latency := time.Since(p.start)
		code := ex.resp.StatusCode
		if p.t.followRedirects && isRedirect(code) {
			if loc := ex.resp.Header.Get("Location"); loc != "" {
				ex.close()
				res := Result{Status: code, Proto: p.proto, Latency: latency, Phase: PhaseHeaders}
				next, where := p.t.redirectTarget(u, loc)
				switch {
				case next == nil:
					res.Reason = OffHostRedirect
					res.Detail = fmt.Sprintf("HTTP %d redirects off the origin, to %s", code, where)
					return res, nil
				case hops == MaxRedirects:
					res.Reason = TooManyRedirects
					res.Detail = fmt.Sprintf("HTTP %d: still redirecting after %d redirects", code, MaxRedirects)
					return res, nil
				}
				u = next
				continue
			}
		}
		res, err := p.judge(ex, latency)
		ex.close()
		return afterRedirects(res, hops), err
	}
}

// afterRedirects notes in the detail how many redirects led to the result.
func afterRedirects(res Result, hops int) Result {
	if hops > 0 && res.Detail != "" {
		res.Detail += fmt.Sprintf(" after %d redirect%s", hops, plural(hops))
	}
	return res
}

// judge decides on one response: on its headers first, then on its body.
func (p *prober) judge(ex *exchange, latency time.Duration) (Result, error) {
	code := ex.resp.StatusCode
	res := Result{Status: code, Proto: p.proto, Latency: latency, Phase: PhaseHeaders}
	switch {
	case code >= 500:
		res.Reason, res.Detail = HTTP5xx, statusDetail(code)
		return res, nil
	case len(p.t.expectedStatuses) > 0 && !containsInt(p.t.expectedStatuses, code):
		res.Reason = UnexpectedStatus
		res.Detail = fmt.Sprintf("HTTP %d, expected one of %v", code, p.t.expectedStatuses)
		return res, nil
	case p.t.maxLatency > 0 && latency > p.t.maxLatency:
		res.Reason = TooSlow
		res.Detail = fmt.Sprintf("headers after %v, limit %v", latency.Round(time.Microsecond), p.t.maxLatency)
		return res, nil
	}

	p.setPhase(phaseBody)
	n, found, err := readBody(ex.resp.Body, p.t.expectedBody, p.t.maxBody)
	if errors.Is(err, errRawLimit) {
		err = nil // the framing around the body reached its bound: as good as the cap
	}
	if err != nil {
		r, err := p.failed(err, code, n)
		r.Latency = latency
		return r, err
	}
	res.BodyBytes, res.Phase = n, PhaseBody
	if !found {
		res.Reason = BodyMismatch
		if n >= p.t.maxBody {
			res.Detail = "expected text not in the first " + sizeString(p.t.maxBody) + " of the body"
		} else {
			res.Detail = "expected text not in the body (" + sizeString(n) + ")"
		}
		return res, nil
	}
	res.Up, res.Reason, res.Phase, res.Detail = true, OK, "", statusDetail(code)
	return res, nil
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

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

// sizeString writes a byte count for a human: "1 MiB", "64 KiB", "1234 bytes".
func sizeString(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	case n == 1:
		return "1 byte"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// shorten keeps details short: a detail is a hint for a human, not a dump.
func shorten(s string) string {
	const limit = 200
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
