package customerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"
)

// DefaultBaseURL is the dnspup Customer API endpoint.
const DefaultBaseURL = "https://api.dnspup.com"

// maxBody bounds how much of an answer is read.
const maxBody = 8 << 20

// Secret is a credential. It prints as "[redacted]" in every format and in
// JSON, so it cannot leak through a log line or an error by accident; Reveal
// returns the value for the one place that needs it (the request header).
type Secret struct{ v string }

// NewSecret wraps a credential value.
func NewSecret(v string) Secret { return Secret{v: v} }

// Reveal returns the credential value.
func (s Secret) Reveal() string { return s.v }

// Empty reports whether no value is held.
func (s Secret) Empty() bool { return s.v == "" }

// String returns "[redacted]".
func (s Secret) String() string { return "[redacted]" }

// GoString returns "[redacted]".
func (s Secret) GoString() string { return "[redacted]" }

// MarshalJSON returns "[redacted]".
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// Config configures a Client.
type Config struct {
	// BaseURL is the API root; DefaultBaseURL when empty. It must be an
	// http(s) URL without credentials, query or fragment.
	BaseURL string
	// Key and Secret are sent as X-API-Key and X-API-Secret.
	Key, Secret Secret
	// HTTPClient does the requests; a pooled client when nil. Its Timeout,
	// if any, bounds each attempt; the caller's context bounds the call.
	HTTPClient *http.Client
	// RetryMax is how many times a retryable request is retried; 2 when 0,
	// none when negative.
	RetryMax int
	// RetryWaitMin and RetryWaitMax bound the wait between attempts
	// (200ms and 2s when 0). A Retry-After longer than RetryWaitMax is not
	// waited for: the *Error is returned with RetryAfter set.
	RetryWaitMin, RetryWaitMax time.Duration
	// UserAgent is sent as User-Agent; "vigil-source-dnspup" when empty.
	UserAgent string
	// MaxPages bounds how many pages of GET /v1/nodes are read;
	// DefaultMaxPages when 0.
	MaxPages int
	// PollInterval is the wait between polls of an asynchronous probe
	// result (202 Accepted) when the answer gives no Retry-After;
	// DefaultPollInterval when 0.
	PollInterval time.Duration
}

// DefaultMaxPages is how many pages of GET /v1/nodes are read at most.
const DefaultMaxPages = 20

// DefaultPollInterval is the wait between polls of a 202 Accepted probe.
const DefaultPollInterval = 500 * time.Millisecond

// Client calls the dnspup Customer API v1. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	key       Secret
	secret    Secret
	userAgent string
	rc        *retryablehttp.Client
	maxPages  int
	pollEvery time.Duration
}

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	raw := cfg.BaseURL
	if raw == "" {
		raw = DefaultBaseURL
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("api_base %q: want an absolute http or https URL such as %s", redactURL(raw), DefaultBaseURL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("api_base %q: must not carry credentials, a query or a fragment; credentials come from the environment", redactURL(raw))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	hc := cfg.HTTPClient
	if hc == nil {
		hc = cleanhttp.DefaultPooledClient()
	}
	c := &Client{
		base:      u,
		key:       cfg.Key,
		secret:    cfg.Secret,
		userAgent: cfg.UserAgent,
	}
	c.maxPages = cfg.MaxPages
	if c.maxPages <= 0 {
		c.maxPages = DefaultMaxPages
	}
	c.pollEvery = cfg.PollInterval
	if c.pollEvery <= 0 {
		c.pollEvery = DefaultPollInterval
	}
	if c.userAgent == "" {
		c.userAgent = "vigil-source-dnspup"
	}
	retryMax := cfg.RetryMax
	switch {
	case retryMax == 0:
		retryMax = 2
	case retryMax < 0:
		retryMax = 0
	}
	waitMin, waitMax := cfg.RetryWaitMin, cfg.RetryWaitMax
	if waitMin <= 0 {
		waitMin = 200 * time.Millisecond
	}
	if waitMax <= 0 {
		waitMax = 2 * time.Second
	}
	if waitMax < waitMin {
		waitMax = waitMin
	}
	c.rc = &retryablehttp.Client{
		HTTPClient:   hc,
		Logger:       nil, // this package logs nothing; callers log errors they get
		RetryWaitMin: waitMin,
		RetryWaitMax: waitMax,
		RetryMax:     retryMax,
		CheckRetry:   c.checkRetry,
		Backoff:      retryWait,
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	return c, nil
}

// BaseURL returns the API root in use.
func (c *Client) BaseURL() string { return c.base.String() }

// Health calls GET /v1/health (no credentials sent).
func (c *Client) Health(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/v1/health", nil, false)
	return err
}

// Nodes calls GET /v1/nodes and returns the checkpoints sorted by id. It
// follows the pages (see nextPage) up to Config.MaxPages, and fails naming
// that bound when the list has more.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	path := "/v1/nodes"
	var all []Node
	seen := map[string]bool{}
	for page := 1; ; page++ {
		a, err := c.call(ctx, http.MethodGet, path, nil, true)
		if err != nil {
			return nil, err
		}
		nodes, err := ParseNodes(a.body)
		if err != nil {
			return nil, fmt.Errorf("dnspup api: GET %s: %w", path, err)
		}
		all = append(all, nodes...)
		next := c.nextPage(a.body, a.header, "/v1/nodes")
		if next == "" {
			break
		}
		if seen[next] {
			return nil, fmt.Errorf("dnspup api: GET /v1/nodes: page %d points back to %s, an earlier page; the API's pagination is broken", page, next)
		}
		seen[next] = true
		if page >= c.maxPages {
			return nil, fmt.Errorf("dnspup api: GET /v1/nodes: the node list goes on past %d pages (the client's MaxPages); list the checkpoints explicitly or raise the bound", c.maxPages)
		}
		path = next
	}
	// Sorted and without duplicates across pages, as ParseNodes gives one page.
	byID := map[string]bool{}
	out := all[:0]
	for _, n := range all {
		if !byID[n.ID] {
			byID[n.ID] = true
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Probe calls POST /v1/probes for one target. An asynchronous answer (202
// Accepted with an id) is polled until ready or until ctx is done; then the
// error is a *PendingError.
func (c *Client) Probe(ctx context.Context, req ProbeRequest) (TargetResult, error) {
	body, err := c.post(ctx, "/v1/probes", req)
	if err != nil {
		return TargetResult{Target: req.Target}, err
	}
	res, err := ParseProbeResponse(body, req.Target)
	if err != nil {
		return res, fmt.Errorf("dnspup api: POST /v1/probes: %w", err)
	}
	return res, nil
}

// BatchProbe calls POST /v1/batch-probes and returns one TargetResult per
// requested target, in request order. An asynchronous answer is polled as
// for Probe.
func (c *Client) BatchProbe(ctx context.Context, req BatchProbeRequest) ([]TargetResult, error) {
	body, err := c.post(ctx, "/v1/batch-probes", req)
	if err != nil {
		return nil, err
	}
	res, err := ParseBatchProbeResponse(body, req.Targets)
	if err != nil {
		return res, fmt.Errorf("dnspup api: POST /v1/batch-probes: %w", err)
	}
	return res, nil
}

// PendingError is a probe request dnspup accepted (202, so it cost quota)
// whose result was not ready before the caller's context was done.
type PendingError struct {
	// Op is the request, e.g. "POST /v1/probes".
	Op string
	// ID is the id dnspup gave the pending result; empty when the 202
	// answer had none (nothing can be polled).
	ID string
	// Polls is how many times the result was asked for.
	Polls int
	err   error
}

func (e *PendingError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("dnspup api: %s: %v", e.Op, e.err)
	}
	return fmt.Sprintf("dnspup api: %s: accepted as %s (202) but not ready after %d polls: %v", e.Op, e.ID, e.Polls, e.err)
}

// Unwrap returns why polling stopped (the context's error, or a poll's).
func (e *PendingError) Unwrap() error { return e.err }

// post sends a probe request; a 202 answer is polled (see pollPath).
func (c *Client) post(ctx context.Context, path string, in any) ([]byte, error) {
	a, err := c.call(ctx, http.MethodPost, path, in, true)
	if err != nil {
		return nil, err
	}
	if a.status != http.StatusAccepted {
		return a.body, nil
	}
	op := "POST " + path
	id := pendingID(a.body)
	if id == "" {
		// Accepted (and charged) but nothing to poll: pending for good.
		return nil, &PendingError{Op: op, err: errors.New("202 Accepted without an id to poll")}
	}
	poll := path + "/" + url.PathEscape(id)
	if loc := a.header.Get("Location"); loc != "" {
		if p := c.samePath(loc); p != "" {
			poll = p
		}
	}
	pe := &PendingError{Op: op, ID: id}
	for {
		wait := c.pollEvery
		if ra, ok := ParseRetryAfter(a.header.Get("Retry-After"), time.Now()); ok {
			wait = ra
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			pe.err = ctx.Err()
			return nil, pe
		case <-t.C:
		}
		pe.Polls++
		a, err = c.call(ctx, http.MethodGet, poll, nil, true)
		if err != nil {
			if ctx.Err() != nil {
				pe.err = ctx.Err()
				return nil, pe
			}
			pe.err = err
			return nil, pe
		}
		if a.status != http.StatusAccepted {
			return a.body, nil
		}
	}
}

// pendingID reads the id of a 202 answer: "id", "probeId" or "jobId".
func pendingID(body []byte) string {
	v, err := decodeLoose(body)
	if err != nil {
		return ""
	}
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	for _, k := range []string{"id", "probeId", "probe_id", "jobId", "job_id"} {
		switch x := m[k].(type) {
		case string:
			if x = strings.TrimSpace(x); x != "" {
				return x
			}
		case json.Number:
			return x.String()
		}
	}
	return ""
}

// samePath returns the path (and query) of ref when it resolves under the
// API root, else "" (a link to another host is not followed: the
// credentials would go with it).
func (c *Client) samePath(ref string) string {
	u, err := c.base.Parse(ref)
	if err != nil || u.Scheme != c.base.Scheme || u.Host != c.base.Host || !strings.HasPrefix(u.Path, c.base.Path+"/") {
		return ""
	}
	p := strings.TrimPrefix(u.Path, c.base.Path)
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}

// do sends one logical request and returns the body of a 2xx answer, or an
// *Error, or a transport error.
func (c *Client) do(ctx context.Context, method, path string, in any, auth bool) ([]byte, error) {
	a, err := c.call(ctx, method, path, in, auth)
	if err != nil {
		return nil, err
	}
	return a.body, nil
}

// answer is a 2xx answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// call sends one logical request (with the retries the policy allows) and
// returns a 2xx answer, or an *Error, or a transport error. path may carry
// a query.
func (c *Client) call(ctx context.Context, method, path string, in any, auth bool) (answer, error) {
	op := method + " " + path
	var payload []byte
	if in != nil {
		var err error
		if payload, err = json.Marshal(in); err != nil {
			return answer{}, fmt.Errorf("dnspup api: %s: encode request: %w", op, err)
		}
	}
	u := *c.base
	p, q, _ := strings.Cut(path, "?")
	u.Path += p
	u.RawQuery = q
	var body any
	if payload != nil {
		body = payload
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return answer{}, fmt.Errorf("dnspup api: %s: %w", op, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth {
		req.Header.Set("X-API-Key", c.key.Reveal())
		req.Header.Set("X-API-Secret", c.secret.Reveal())
	}
	resp, err := c.rc.Do(req)
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return answer{}, c.transportError(op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return answer{}, c.transportError(op+": read answer", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return answer{}, parseError(op, resp.StatusCode, resp.Header, data, c.scrub)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// TransportError is a request that got no (complete) HTTP answer.
type TransportError struct {
	// Op is the request, e.g. "POST /v1/probes".
	Op string
	// Sent is false only when the connection was never made, so the request
	// cannot have been accepted (or cost quota).
	Sent bool
	// Timeout is true when the request or its context ran out of time.
	Timeout bool
	err     error
	text    string
}

func (e *TransportError) Error() string { return "dnspup api: " + e.Op + ": " + e.text }

// Unwrap returns the underlying error (context.DeadlineExceeded, …).
func (e *TransportError) Unwrap() error { return e.err }

func (c *Client) transportError(op string, err error) *TransportError {
	var ne net.Error
	timeout := errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
	return &TransportError{Op: op, Sent: !notSent(err), Timeout: timeout, err: err, text: c.scrub(err.Error())}
}

// scrub removes the credential values from s.
func (c *Client) scrub(s string) string {
	for _, v := range []string{c.key.Reveal(), c.secret.Reveal()} {
		if v != "" {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// checkRetry is the retry policy; see the package doc.
func (c *Client) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	post := false
	if resp != nil && resp.Request != nil {
		post = resp.Request.Method != http.MethodGet && resp.Request.Method != http.MethodHead
	}
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			post = ue.Op != "Get" && ue.Op != "Head"
		}
		if post {
			// Only a failed dial is proof that nothing reached the API.
			return notSent(err), nil
		}
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		code := peekCode(resp)
		cls := ClassOf(code, resp.StatusCode)
		if cls != ClassRateLimited && cls != ClassUnavailable {
			return false, nil // quota_exceeded and friends: not now
		}
		if post && code == "" {
			return false, nil // a bare 503 from a proxy says nothing about acceptance
		}
		wait, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		if !ok {
			return true, nil
		}
		if wait > c.rc.RetryWaitMax {
			return false, nil // too long to wait in-call: the caller holds off
		}
		if dl, has := ctx.Deadline(); has && time.Until(dl) < wait+wait/10+250*time.Millisecond {
			return false, nil
		}
		return true, nil
	case resp.StatusCode >= 500 && !post:
		return resp.StatusCode != http.StatusNotImplemented, nil
	}
	return false, nil
}

// peekCode reads the envelope's code and puts the body back.
func peekCode(resp *http.Response) string {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	var env envelope
	if json.Unmarshal(data, &env) == nil && env.Error != nil {
		return textOf(env.Error.Code)
	}
	return ""
}

// notSent reports whether err proves the request never left: the dial failed.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// retryWait is go-retryablehttp's Backoff hook, the wait before the retry
// that follows attempt (0 for the first): Retry-After plus jitter when the
// answer gives one, else a step that doubles from lo up to hi, the wait
// drawn between half and all of it ("equal jitter").
func retryWait(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if ra, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return WithJitter(ra)
		}
	}
	// The library draws each wait within ±RandomizationFactor of its
	// current interval: an interval of three quarters of the step with a
	// factor of 1/3 spans exactly half to all of the step. The hook is
	// called afresh for each attempt, so the steps before it are replayed
	// (64 doublings reach any cap).
	b := &backoff.ExponentialBackOff{InitialInterval: lo * 3 / 4, RandomizationFactor: 1.0 / 3, Multiplier: 2, MaxInterval: hi * 3 / 4}
	d := b.NextBackOff()
	for range min(attempt, 64) {
		d = b.NextBackOff()
	}
	return d
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	u.RawQuery = ""
	return u.String()
}
