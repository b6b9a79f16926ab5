package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// Defaults of Options, justified in the package documentation.
const (
	DefaultFailCount       = 3
	DefaultFailWindow      = 10 * time.Second
	DefaultSkipFor         = 10 * time.Second
	DefaultRetries         = 1
	DefaultRetryBudget     = 10 * time.Second
	DefaultMaxReplayBody   = 64 << 10
	DefaultConnectTimeout  = 5 * time.Second
	DefaultResponseTimeout = 30 * time.Second
)

// Options tune the proxy. Zero values take the defaults.
type Options struct {
	// FailCount failures of an origin within FailWindow skip it for SkipFor.
	FailCount  int
	FailWindow time.Duration
	SkipFor    time.Duration
	// Retries is the most retries of one request (0 takes the default; use
	// NoRetries to turn retries off).
	Retries int
	// RetryBudget: no retry starts once this much time has passed since the
	// request arrived.
	RetryBudget time.Duration
	// MaxReplayBody is the largest request body buffered for a retry.
	MaxReplayBody int64
	// ConnectTimeout bounds connecting to an origin (TCP and TLS).
	ConnectTimeout time.Duration
	// ResponseTimeout bounds the wait for an origin's response headers.
	ResponseTimeout time.Duration
	// TLS is the base TLS configuration for https origins (RootCAs for a
	// private CA); ServerName is set to the site's hostname.
	TLS *tls.Config
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Registerer receives the metrics (default: none registered).
	Registerer prometheus.Registerer
	// Log receives failures and skips.
	Log hclog.Logger
	// OnAttempt, when set, is called (synchronously, on the request's
	// goroutine) with the outcome of every attempt on an origin once its
	// response header came or it failed; not for an attempt the visitor
	// gave up on. It must be quick and must not keep the Attempt's
	// references past the call. vigil-node feeds its passive windows with
	// it. Nil costs nothing.
	OnAttempt func(Attempt)
}

// Attempt is the outcome of one attempt of the proxy on an origin, as
// Options.OnAttempt sees it. It holds no pointer to the request: passed by
// value, it costs no allocation.
type Attempt struct {
	// Site and Origin are the published names; Address is the origin's
	// address as published.
	Site, Origin, Address string
	// Status is the response's status, 0 when none came (Err says why).
	Status int
	// Err is "timeout" or "connect_error" when no response came, else "".
	Err string
	// RetryAfter says the response carried a Retry-After header.
	RetryAfter bool
	// Latency is from the attempt's start to its response header (or
	// failure).
	Latency time.Duration
	// Method and Path are the request's method and URL path, without its
	// query (vigil-node's canaries ask again for a path that failed).
	Method, Path string
}

// NoRetries in Options.Retries turns retries off.
const NoRetries = -1

func (o *Options) defaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.FailCount <= 0 {
		o.FailCount = DefaultFailCount
	}
	def(&o.FailWindow, DefaultFailWindow)
	def(&o.SkipFor, DefaultSkipFor)
	switch {
	case o.Retries == 0:
		o.Retries = DefaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	def(&o.RetryBudget, DefaultRetryBudget)
	if o.MaxReplayBody <= 0 {
		o.MaxReplayBody = DefaultMaxReplayBody
	}
	def(&o.ConnectTimeout, DefaultConnectTimeout)
	def(&o.ResponseTimeout, DefaultResponseTimeout)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = hclog.NewNullLogger()
	}
}

// Proxy is the reverse proxy. It serves nothing until SetSnapshot.
type Proxy struct {
	opts    Options
	track   *tracker
	m       *metrics
	reverse *httputil.ReverseProxy

	state atomic.Pointer[state]
	mu    sync.Mutex // serializes SetSnapshot
}

// state is one publication, ready to serve.
type state struct {
	snap  *publication.Snapshot
	sites map[string]*site // by hostname
}

type site struct {
	pub publication.Site
	// origins are the current level's origins, then, during a ramp, the
	// origins of the level being left (Ramp.FromOrigins), then the backup
	// level's (Backup.Origins, those not already listed):
	// origins[:nLevel], origins[nLevel:nRamp] and origins[nRamp:].
	origins []origin
	nLevel  int
	nRamp   int
	// weight is the ramp's per cent of new requests for the current level,
	// 1 to 99; 0 when the site has no ramp (or one of its levels has no
	// usable origin): every request goes to the current level.
	weight   uint64
	rr       atomic.Uint64
	rrFrom   atomic.Uint64 // the round-robin of origins[nLevel:nRamp]
	rrBackup atomic.Uint64 // the round-robin of origins[nRamp:]
	// backupLogged is set once a request of this publication was served
	// by the backup level and that was logged.
	backupLogged atomic.Bool
	// split counts the new requests of a ramp: request n goes to the
	// current level when n*weight/100 steps up, so that every 100
	// consecutive requests give the current level exactly weight.
	split atomic.Uint64
	// transport holds the site's keep-alive origin connections; it is
	// kept across publications.
	transport *http.Transport
	m         *siteMetrics
}

type origin struct {
	pub       publication.Origin
	url       *url.URL
	key       originKey
	level     int // the origin's level: the site's, its ramp's From or its Backup's
	unhealthy bool
	h         *health // the tracker's entry for key
}

// New returns a proxy with opts.
func New(opts Options) (*Proxy, error) {
	opts.defaults()
	p := &Proxy{opts: opts, track: newTracker(opts.Now, opts.FailCount, opts.FailWindow, opts.SkipFor), m: newMetrics()}
	if opts.Registerer != nil {
		if err := p.m.register(opts.Registerer); err != nil {
			return nil, fmt.Errorf("proxy metrics: %w", err)
		}
	}
	p.reverse = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "origin.invalid" // set per attempt by the transport
			r.Out.Host = r.In.Host
			r.SetXForwarded()
		},
		Transport:    (*retrier)(p),
		ErrorHandler: p.fail,
		ErrorLog:     opts.Log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		BufferPool:   copyBuffers{},
	}
	return p, nil
}

// Snapshot returns the publication being served, or nil.
func (p *Proxy) Snapshot() *publication.Snapshot {
	if st := p.state.Load(); st != nil {
		return st.snap
	}
	return nil
}

// SetSnapshot makes snap the publication served from the next request on.
// Invalid origin addresses are logged and left out.
func (p *Proxy) SetSnapshot(snap *publication.Snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setSnapshotLocked(snap, true)
}

// SetTLS makes the connections to https origins opened from now on use
// cfg (a renewed -origin-ca; nil: the system's roots). Idle connections
// are closed; requests in flight end on the connection they have.
func (p *Proxy) SetTLS(cfg *tls.Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opts.TLS = cfg
	if st := p.state.Load(); st != nil {
		p.setSnapshotLocked(st.snap, false)
	}
}

// setSnapshotLocked builds the state of snap; reuse keeps the transports
// of the sites that stay (a new snapshot), else every site gets a new one
// (new TLS settings). Called with p.mu held.
func (p *Proxy) setSnapshotLocked(snap *publication.Snapshot, reuse bool) {
	old := p.state.Load()
	next := &state{snap: snap, sites: make(map[string]*site, len(snap.Sites))}
	live := map[originKey]bool{}
	for _, ps := range snap.Sites {
		s := &site{pub: ps}
		var prev *site
		if old != nil {
			prev = old.sites[NormalizeHost(ps.Hostname)]
		}
		if prev != nil && prev.pub.Name == ps.Name {
			s.m = prev.m
		} else {
			s.m = &siteMetrics{}
			s.m.init(p.m, ps.Name)
		}
		add := func(o publication.Origin, level int) {
			if level != ps.Level && s.listed(o.Address) {
				return // a backup origin that is the ramp's too (or listed twice)
			}
			u, err := url.Parse(o.Address)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				p.opts.Log.Error("published origin address unusable: origin left out", "site", ps.Name, "level", level, "origin", o.Name, "address", o.Address)
				return
			}
			k := originKey{ps.Name, o.Name, o.Address}
			live[k] = true
			s.origins = append(s.origins, origin{pub: o, url: u, key: k, level: level, unhealthy: o.State == "unhealthy", h: p.track.get(k)})
		}
		for _, o := range ps.Origins {
			add(o, ps.Level)
		}
		s.nLevel = len(s.origins)
		if r := ps.Ramp; r != nil && r.Weight > 0 && r.Weight < 100 {
			for _, o := range r.FromOrigins {
				add(o, r.From)
			}
			if s.nLevel > 0 && len(s.origins) > s.nLevel {
				s.weight = uint64(r.Weight)
			}
		}
		s.nRamp = len(s.origins)
		if b := ps.Backup; b != nil && b.Level != ps.Level {
			for _, o := range b.Origins {
				add(o, b.Level)
			}
		}
		if prev != nil && reuse {
			s.transport = prev.transport
		}
		if s.transport == nil {
			s.transport = p.newTransport(ps.Hostname)
		}
		next.sites[NormalizeHost(ps.Hostname)] = s
	}
	if old != nil {
		for h, s := range old.sites {
			if _, ok := next.sites[h]; !ok || !reuse {
				s.transport.CloseIdleConnections()
			}
		}
	}
	p.track.keep(live)
	p.state.Store(next)
}

// listed reports whether an origin of address is among s's origins.
func (s *site) listed(address string) bool {
	for i := range s.origins {
		if s.origins[i].pub.Address == address {
			return true
		}
	}
	return false
}

func (p *Proxy) newTransport(hostname string) *http.Transport {
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if p.opts.TLS != nil {
		tlsConf = p.opts.TLS.Clone()
	}
	tlsConf.ServerName = hostname
	d := &net.Dialer{Timeout: p.opts.ConnectTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:           d.DialContext,
		TLSClientConfig:       tlsConf,
		TLSHandshakeTimeout:   p.opts.ConnectTimeout,
		ResponseHeaderTimeout: p.opts.ResponseTimeout,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
}

type ctxKey struct{}

type request struct {
	site    *site
	start   time.Time
	retries int
	from    bool // the ramp sent this request to the level being left
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := p.state.Load()
	if st == nil {
		p.m.requests.WithLabelValues("", "no_publication").Inc()
		http.Error(w, "vigil-node: no publication yet: the node has not reached the control plane and has no saved snapshot (check -control-plane and -state-dir)", http.StatusServiceUnavailable)
		return
	}
	ss := st.sites[NormalizeHost(r.Host)]
	if ss == nil {
		p.m.requests.WithLabelValues("", "unknown_host").Inc()
		http.Error(w, fmt.Sprintf("vigil-node: no published site has hostname %q: check the Host header, or the site's hostname in the vigil configuration", hostOnly(r.Host)), http.StatusMisdirectedRequest)
		return
	}
	if len(ss.origins) == 0 {
		p.m.requests.WithLabelValues(ss.pub.Name, "no_origin").Inc()
		http.Error(w, fmt.Sprintf("vigil-node: site %q has no enabled origin at its current level %d", ss.pub.Name, ss.pub.Level), http.StatusServiceUnavailable)
		return
	}
	start := p.opts.Now()
	from := ss.weight != 0 && ss.toFrom()
	rw := &recorder{ResponseWriter: w}
	req := &request{site: ss, start: start, from: from}
	p.reverse.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), ctxKey{}, req)))
	code := rw.code
	if code == 0 {
		code = http.StatusOK
	}
	ss.m.code(p.m, ss.pub.Name, code/100).Inc()
	ss.m.observer(p.m, ss.pub.Name).Observe(p.opts.Now().Sub(start).Seconds())
}

// fail answers a request that no origin answered.
func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, err error) {
	name := ""
	if req, ok := r.Context().Value(ctxKey{}).(*request); ok {
		name = req.site.pub.Name
	}
	if r.Context().Err() != nil {
		w.WriteHeader(499) // the visitor went away; nobody reads this
		return
	}
	p.opts.Log.Warn("request failed on every origin tried", "site", name, "method", r.Method, "error", err)
	http.Error(w, fmt.Sprintf("vigil-node: no origin of site %q answered; try again later", name), http.StatusBadGateway)
}

// retrier is the proxy's transport: it runs the attempts of one request.
type retrier Proxy

func (rt *retrier) RoundTrip(out *http.Request) (*http.Response, error) {
	p := (*Proxy)(rt)
	req := out.Context().Value(ctxKey{}).(*request)
	s := req.site
	retryable := idempotent(out.Method)
	var body []byte
	if retryable && out.Body != nil && out.Body != http.NoBody {
		var err error
		body, out.Body, retryable, err = buffer(out.Body, out.ContentLength, p.opts.MaxReplayBody)
		if err != nil {
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
	}
	tried := make([]bool, len(s.origins))
	for {
		i := p.pick(s, tried, req.from)
		o := &s.origins[i]
		tried[i] = true
		attempt := out.Clone(out.Context())
		attempt.URL.Scheme, attempt.URL.Host = o.url.Scheme, o.url.Host
		if body != nil {
			attempt.Body = io.NopCloser(bytes.NewReader(body))
		}
		var began time.Time
		if p.opts.OnAttempt != nil {
			began = p.opts.Now()
		}
		resp, err := s.transport.RoundTrip(attempt)
		if out.Context().Err() != nil {
			return resp, err
		}
		if p.opts.OnAttempt != nil {
			p.report(s, o, out, resp, err, began)
		}
		outcome := classify(resp, err)
		if outcome == "" {
			p.track.succeeded(o.h)
			p.answered(s, i)
			return resp, err
		}
		p.failed(s, o, outcome)
		if !retryable || req.retries >= p.opts.Retries || p.opts.Now().Sub(req.start) >= p.opts.RetryBudget || !untried(tried) {
			p.answered(s, i)
			return resp, err
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
		}
		req.retries++
		p.m.retries.WithLabelValues(s.pub.Name).Inc()
	}
}

// report hands the outcome of an attempt of out on o begun at began to
// Options.OnAttempt.
func (p *Proxy) report(s *site, o *origin, out *http.Request, resp *http.Response, err error, began time.Time) {
	a := Attempt{Site: s.pub.Name, Origin: o.pub.Name, Address: o.pub.Address, Latency: p.opts.Now().Sub(began),
		Method: out.Method, Path: out.URL.Path}
	switch {
	case err != nil:
		a.Err = classifyStatus(0, err)
	case resp != nil:
		a.Status = resp.StatusCode
		_, a.RetryAfter = resp.Header["Retry-After"]
	}
	p.opts.OnAttempt(a)
}

// failed counts a failed attempt on o and tracks it.
func (p *Proxy) failed(s *site, o *origin, outcome string) {
	p.m.originErrors.WithLabelValues(s.pub.Name, o.pub.Name, outcome).Inc()
	if p.track.failed(o.h) {
		p.m.skips.WithLabelValues(s.pub.Name, o.pub.Name).Inc()
		p.opts.Log.Warn("origin skipped after repeated failures", "site", s.pub.Name, "origin", o.pub.Name,
			"failures", p.opts.FailCount, "within", p.opts.FailWindow.String(), "skip_for", p.opts.SkipFor.String())
	}
}

// answered counts a request whose answer came from s.origins[i] (passed
// on to the visitor, success or not) when i is a backup origin, and logs
// the first such request of the publication.
func (p *Proxy) answered(s *site, i int) {
	if i < s.nRamp {
		return
	}
	p.m.backups.WithLabelValues(s.pub.Name).Inc()
	if !s.backupLogged.Swap(true) {
		o := &s.origins[i]
		p.opts.Log.Warn("every origin of the current level failed or is skipped: serving from the backup level until the control plane switches",
			"site", s.pub.Name, "level", s.pub.Level, "backup_level", o.level, "origin", o.pub.Name)
	}
}

// toFrom draws whether a new request of a ramping site goes to the level
// being left: of every 100 consecutive requests, exactly 100-weight do.
func (s *site) toFrom() bool {
	n := s.split.Add(1)
	return (n+1)*s.weight/100 == n*s.weight/100
}

// pick returns the next origin to try: round-robin over the untried origins
// of the best tier (neither skipped nor unhealthy; then not skipped; then
// any). Some origin is untried when pick is called.
//
// During a ramp the request's level (the current one, or the one being left
// when from is set) is tried first: its origins that are not skipped (tiers
// 0 and 1), then the other level's that are not skipped, then any untried
// origin, the request's level first. A retry so stays within the chosen
// level while it has an origin not known to fail, and then falls back to
// the other level rather than to an origin the proxy skips.
//
// The backup level's origins (origins[nRamp:]) come after the levels
// above, tier by tier: one not skipped is picked only once every origin of
// the levels above is skipped or was tried by this request, and a skipped
// one only once every origin is skipped.
func (p *Proxy) pick(s *site, tried []bool, from bool) int {
	n := len(s.origins)
	if s.weight == 0 {
		if s.nRamp == n {
			return p.pickIn(s, tried, 0, n, 0, 3)
		}
		if i := p.pickIn(s, tried, 0, s.nRamp, 0, 2); i >= 0 {
			return i
		}
		if i := p.pickIn(s, tried, s.nRamp, n, 0, 2); i >= 0 {
			return i
		}
		if i := p.pickIn(s, tried, 0, s.nRamp, 2, 3); i >= 0 {
			return i
		}
		return p.pickIn(s, tried, s.nRamp, n, 2, 3)
	}
	lo, hi, olo, ohi := 0, s.nLevel, s.nLevel, s.nRamp
	if from {
		lo, hi, olo, ohi = olo, ohi, lo, hi
	}
	if i := p.pickIn(s, tried, lo, hi, 0, 2); i >= 0 {
		return i
	}
	if i := p.pickIn(s, tried, olo, ohi, 0, 2); i >= 0 {
		return i
	}
	if i := p.pickIn(s, tried, s.nRamp, n, 0, 2); i >= 0 {
		return i
	}
	if i := p.pickIn(s, tried, lo, hi, 2, 3); i >= 0 {
		return i
	}
	if i := p.pickIn(s, tried, olo, ohi, 2, 3); i >= 0 {
		return i
	}
	return p.pickIn(s, tried, s.nRamp, n, 2, 3)
}

// pickIn is pick over origins[lo:hi] and tiers [tlo, thi), or -1.
func (p *Proxy) pickIn(s *site, tried []bool, lo, hi, tlo, thi int) int {
	n := hi - lo
	if n <= 0 {
		return -1
	}
	rr := &s.rr
	switch {
	case lo >= s.nRamp && lo > 0:
		rr = &s.rrBackup
	case lo >= s.nLevel && lo > 0:
		rr = &s.rrFrom
	}
	start := int(rr.Add(1) % uint64(n))
	now := p.opts.Now()
	for tier := tlo; tier < thi; tier++ {
		for j := 0; j < n; j++ {
			i := lo + (start+j)%n
			o := &s.origins[i]
			if tried[i] {
				continue
			}
			switch tier {
			case 0:
				if o.unhealthy || p.track.skipped(o.h, now) {
					continue
				}
			case 1:
				if p.track.skipped(o.h, now) {
					continue
				}
			}
			return i
		}
	}
	return -1
}

func untried(tried []bool) bool {
	for _, t := range tried {
		if !t {
			return true
		}
	}
	return false
}

// idempotent reports whether RFC 9110 section 9.2.2 makes method idempotent.
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// buffer reads a body of at most max bytes into memory. For a larger (or
// unknown and larger) body it returns a reader streaming what was read and
// the rest, and replayable = false.
func buffer(body io.ReadCloser, length, max int64) (buf []byte, rest io.ReadCloser, replayable bool, err error) {
	if length > max {
		return nil, body, false, nil
	}
	buf, err = io.ReadAll(io.LimitReader(body, max+1))
	if err != nil {
		_ = body.Close()
		return nil, nil, false, err
	}
	if int64(len(buf)) > max {
		return nil, struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf), body), body}, false, nil
	}
	_ = body.Close()
	return buf, io.NopCloser(bytes.NewReader(buf)), true, nil
}

// classify names a failed attempt's outcome, or "" for a success.
func classify(resp *http.Response, err error) string {
	if err != nil || resp == nil {
		return classifyStatus(0, err)
	}
	return classifyStatus(resp.StatusCode, nil)
}

// classifyStatus is classify for an answer of status, or err.
func classifyStatus(status int, err error) string {
	if err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return "timeout"
		}
		return "connect_error"
	}
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return "http_" + strconv.Itoa(status)
	}
	return ""
}

// NormalizeHost returns the hostname a Host header or a published hostname
// names: lower case, without a port or a trailing dot.
func NormalizeHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	if len(h) > 255 {
		return h[:255]
	}
	return h
}

// copyBuffers is the pool of 32 KiB body copy buffers
// (ReverseProxy.BufferPool).
type copyBuffers struct{}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (copyBuffers) Get() []byte  { return *(bufPool.Get().(*[]byte)) }
func (copyBuffers) Put(b []byte) { bufPool.Put(&b) }

// recorder remembers the status written.
type recorder struct {
	http.ResponseWriter
	code int
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 && code >= 200 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
