package proxy

// The proxy's request path as it was before the fast path (issue 19): an
// httputil.ReverseProxy whose transport runs the attempts through
// http.Transport, with a tracker behind one global lock and metrics looked up
// by label values per request. Benchmarks only: BenchmarkProxyCompare runs it
// side by side with the current path in one run, so that the speed-up is a
// ratio measured under the same noise.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"time"
)

type legacyProxy struct {
	p       *Proxy
	track   *legacyTracker
	reverse *httputil.ReverseProxy
}

func newLegacy(p *Proxy) *legacyProxy {
	l := &legacyProxy{p: p, track: &legacyTracker{now: p.opts.Now, count: p.opts.FailCount, window: p.opts.FailWindow, skipFor: p.opts.SkipFor, m: map[originKey]*legacyHealth{}}}
	l.reverse = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "origin.invalid"
			r.Out.Host = r.In.Host
			r.SetXForwarded()
		},
		Transport:    (*legacyRetrier)(l),
		ErrorHandler: l.fail,
	}
	return l
}

type legacyCtxKey struct{}

func (l *legacyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := l.p
	st := p.state.Load()
	if st == nil {
		p.m.requests.WithLabelValues("", "no_publication").Inc()
		http.Error(w, "no publication", http.StatusServiceUnavailable)
		return
	}
	ss := st.sites[NormalizeHost(r.Host)]
	if ss == nil {
		p.m.requests.WithLabelValues("", "unknown_host").Inc()
		http.Error(w, fmt.Sprintf("vigil-node: no published site has hostname %q", hostOnly(r.Host)), http.StatusMisdirectedRequest)
		return
	}
	start := p.opts.Now()
	rw := &recorder{ResponseWriter: w}
	req := &request{site: ss, start: start}
	l.reverse.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), legacyCtxKey{}, req)))
	code := rw.code
	if code == 0 {
		code = http.StatusOK
	}
	p.m.requests.WithLabelValues(ss.pub.Name, strconv.Itoa(code/100)+"xx").Inc()
	p.m.duration.WithLabelValues(ss.pub.Name).Observe(p.opts.Now().Sub(start).Seconds())
}

func (l *legacyProxy) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		w.WriteHeader(499)
		return
	}
	http.Error(w, "no origin answered", http.StatusBadGateway)
}

type legacyRetrier legacyProxy

func (rt *legacyRetrier) RoundTrip(out *http.Request) (*http.Response, error) {
	l := (*legacyProxy)(rt)
	p := l.p
	req := out.Context().Value(legacyCtxKey{}).(*request)
	s := req.site
	retryable := idempotent(out.Method)
	var body []byte
	if retryable && out.Body != nil && out.Body != http.NoBody {
		var err error
		body, out.Body, retryable, err = buffer(out.Body, out.ContentLength, p.opts.MaxReplayBody)
		if err != nil {
			return nil, err
		}
	}
	tried := make([]bool, len(s.origins))
	for {
		i := l.pick(s, tried)
		o := &s.origins[i]
		tried[i] = true
		attempt := out.Clone(out.Context())
		attempt.URL.Scheme, attempt.URL.Host = o.url.Scheme, o.url.Host
		if body != nil {
			attempt.Body = io.NopCloser(bytes.NewReader(body))
		}
		resp, err := s.transport.RoundTrip(attempt)
		outcome := classify(resp, err)
		if outcome == "" || out.Context().Err() != nil {
			return resp, err
		}
		p.m.originErrors.WithLabelValues(s.pub.Name, o.pub.Name, outcome).Inc()
		if l.track.failed(o.key) {
			p.m.skips.WithLabelValues(s.pub.Name, o.pub.Name).Inc()
		}
		if !retryable || req.retries >= p.opts.Retries || p.opts.Now().Sub(req.start) >= p.opts.RetryBudget || !untried(tried) {
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

func (l *legacyProxy) pick(s *site, tried []bool) int {
	n := len(s.origins)
	start := int(s.rr.Add(1) % uint64(n))
	for tier := 0; tier < 3; tier++ {
		for j := 0; j < n; j++ {
			i := (start + j) % n
			o := &s.origins[i]
			if tried[i] {
				continue
			}
			switch tier {
			case 0:
				if o.unhealthy || l.track.skipped(o.key) {
					continue
				}
			case 1:
				if l.track.skipped(o.key) {
					continue
				}
			}
			return i
		}
	}
	return -1
}

type legacyTracker struct {
	now     func() time.Time
	count   int
	window  time.Duration
	skipFor time.Duration
	mu      sync.Mutex
	m       map[originKey]*legacyHealth
}

type legacyHealth struct {
	fails     []time.Time
	skipUntil time.Time
}

func (t *legacyTracker) failed(k originKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	h := t.m[k]
	if h == nil {
		h = &legacyHealth{}
		t.m[k] = h
	}
	if now.Before(h.skipUntil) {
		return false
	}
	cut := 0
	for cut < len(h.fails) && now.Sub(h.fails[cut]) >= t.window {
		cut++
	}
	h.fails = append(h.fails[cut:], now)
	if len(h.fails) >= t.count {
		h.fails = h.fails[:0]
		h.skipUntil = now.Add(t.skipFor)
		return true
	}
	return false
}

func (t *legacyTracker) skipped(k originKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.m[k]
	return h != nil && t.now().Before(h.skipUntil)
}
