package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	cleanhttp "github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-hclog"
	retryablehttp "github.com/hashicorp/go-retryablehttp"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/store"
)

// userAgent is sent with every webhook request.
const userAgent = "vigil-notify/1"

// webhook delivers one notifier's bodies. It is used by one goroutine.
type webhook struct {
	name    string
	format  formatter
	url     string
	events  map[decide.EventKind]bool
	headers http.Header
	redact  *redactor
	client  *retryablehttp.Client
	log     hclog.Logger
	metrics *metrics
	opts    *options

	// The notice being delivered, for the retry log lines.
	seq     uint64
	lastErr string
}

func newWebhook(n *config.Notifier, o *options, log hclog.Logger, m *metrics) (*webhook, error) {
	f, err := newFormatter(n.Format)
	if err != nil {
		return nil, err
	}
	target, err := webhookURL(n)
	if err != nil {
		return nil, err
	}
	headers, err := notifierHeaders(n)
	if err != nil {
		return nil, err
	}
	timeout := n.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	w := &webhook{
		name:    n.Name,
		format:  f,
		url:     target,
		events:  webhookEvents(n),
		headers: headers,
		redact:  newRedactor(target),
		metrics: m,
		opts:    o,
	}
	w.log = log.With("notifier", n.Name, "target", w.redact.target, "format", n.Format)
	w.client = &retryablehttp.Client{
		HTTPClient: &http.Client{
			Transport: cleanhttp.DefaultPooledTransport(),
			Timeout:   timeout,
			// A webhook answers; it does not send us elsewhere (a POST
			// turned into a GET by a 302 would deliver nothing).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		// No retryablehttp logger: it would print the URL. The hooks
		// below log with the target only.
		Logger:       nil,
		RetryWaitMin: o.retryMin,
		RetryWaitMax: o.retryMax,
		// At least once: retry until delivered, rejected, or the
		// dispatcher stops (the cursor keeps the place).
		RetryMax:     math.MaxInt32,
		CheckRetry:   w.checkRetry,
		Backoff:      w.backoff,
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	return w, nil
}

// describe words a transport error for the log: the request URL that
// net/http puts in its errors is replaced by the target, and anything left
// that looks like a part of the URL is scrubbed.
func (w *webhook) describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = fmt.Errorf("%s %s: %w", ue.Op, w.redact.target, ue.Err)
	}
	return w.redact.Error(err)
}

// close releases idle connections.
func (w *webhook) close() { w.client.HTTPClient.CloseIdleConnections() }

// checkRetry is the retry policy: transport errors (refused, reset, timeout,
// TLS) and 408, 429 and 5xx are retried; 2xx is done; any other status is
// a permanent failure of that notice.
func (w *webhook) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		w.lastErr = w.describe(err)
		return true, nil
	}
	if retryable(resp.StatusCode) {
		w.lastErr = "status " + resp.Status
		return true, nil
	}
	return false, nil
}

func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// backoff returns the wait before retry attempt+1: the Retry-After of a 429
// or 503 when it has one (capped at maxRetryAfter), otherwise exponential
// from min to max with jitter (a uniform draw in [d/2, d]).
func (w *webhook) backoff(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
	wait := exponential(minWait, maxWait, attempt)
	from := "backoff"
	if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if ra, ok := retryAfter(resp.Header.Get("Retry-After"), w.opts.now()); ok {
			wait, from = min(ra, w.opts.maxRetryAfter), "retry-after"
		}
	}
	w.metrics.retries.WithLabelValues(w.name).Inc()
	w.log.Warn("webhook delivery failed; retrying", "seq", w.seq, "attempt", attempt+1, "error", w.lastErr, "retry_in", wait.String(), "wait_from", from)
	return wait
}

func exponential(minWait, maxWait time.Duration, attempt int) time.Duration {
	if minWait <= 0 {
		minWait = time.Second
	}
	if maxWait < minWait {
		maxWait = minWait
	}
	d := maxWait
	if attempt < 62 {
		if f := float64(minWait) * math.Pow(2, float64(attempt)); f < float64(maxWait) {
			d = time.Duration(f)
		}
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date.
// A date in the past, or garbage, is not a usable value.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		if s > int64(math.MaxInt64/time.Second) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, false
}

// outcome is how one notice's delivery ended.
type outcome int

const (
	delivered outcome = iota
	rejected          // a permanent failure: logged, not retried
	stopped           // the dispatcher stopped first; the notice is still due
)

// deliver posts e to the webhook until it is accepted (2xx), rejected, or
// ctx ends. It reports false when the event has nothing for this format.
func (w *webhook) deliver(ctx context.Context, e store.Event) (bool, outcome) {
	body, ok, err := w.format.body(e)
	if err != nil {
		w.log.Error("cannot encode the notice; skipping it", "seq", e.Seq, "site", e.Site, "kind", e.Event.Kind.String(), "error", err)
		w.metrics.deliveries.WithLabelValues(w.name, "rejected").Inc()
		return true, rejected
	}
	if !ok || !w.events[e.Event.Kind] {
		return false, delivered
	}
	w.seq, w.lastErr = e.Seq, ""
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, w.url, body)
	if err != nil {
		w.log.Error("cannot build the webhook request; skipping the notice", "seq", e.Seq, "error", w.redact.Error(err))
		w.metrics.deliveries.WithLabelValues(w.name, "rejected").Inc()
		return true, rejected
	}
	for k, vs := range w.headers {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	// The same on every redelivery, so receivers can deduplicate.
	req.Header.Set("Idempotency-Key", fmt.Sprintf("vigil-%d-%d", e.Seq, e.Time.UnixNano()))
	start := w.opts.now()
	resp, err := w.client.Do(req)
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return true, stopped
		}
		// Not expected: checkRetry retries every transport error.
		w.log.Error("webhook delivery failed; skipping the notice", "seq", e.Seq, "site", e.Site, "error", w.describe(err))
		w.metrics.deliveries.WithLabelValues(w.name, "rejected").Inc()
		return true, rejected
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		w.metrics.deliveries.WithLabelValues(w.name, "delivered").Inc()
		w.log.Debug("notice delivered", "seq", e.Seq, "site", e.Site, "kind", e.Event.Kind.String(), "status", resp.StatusCode, "took", w.opts.now().Sub(start).String())
		return true, delivered
	}
	w.metrics.deliveries.WithLabelValues(w.name, "rejected").Inc()
	w.log.Error("webhook rejected the notice; it will not be retried (fix the webhook or its url, then check the notices it missed with `vigil events`)",
		"seq", e.Seq, "site", e.Site, "kind", e.Event.Kind.String(), "status", resp.Status,
		"response", w.redact.String(string(bytes.TrimSpace(snippet))))
	return true, rejected
}

// webhookURL is the webhook's URL: as written, or read from its
// environment variable or file now. Errors name where it was looked for,
// never the value.
func webhookURL(n *config.Notifier) (string, error) {
	var raw string
	switch {
	case n.URLEnv != "":
		raw = strings.TrimSpace(os.Getenv(n.URLEnv))
		if raw == "" {
			return "", fmt.Errorf("notifier %q: url_env names %s, which is unset or empty here: export it where the agent runs", n.Name, n.URLEnv)
		}
	case n.URLFile != "":
		b, err := os.ReadFile(n.URLFile)
		if err != nil {
			return "", fmt.Errorf("notifier %q: url_file: %w", n.Name, err)
		}
		if raw = strings.TrimSpace(string(b)); raw == "" {
			return "", fmt.Errorf("notifier %q: url_file %s is empty", n.Name, n.URLFile)
		}
	default:
		raw = n.URL
	}
	if err := config.CheckWebhookURL(raw); err != nil {
		return "", fmt.Errorf("notifier %q: the url %s (got one for %s)", n.Name, err, target(raw))
	}
	return raw, nil
}

// notifierHeaders are the notifier's extra headers: as written, and those
// whose values are read from the environment now.
func notifierHeaders(n *config.Notifier) (http.Header, error) {
	h := http.Header{}
	for k, v := range n.Headers {
		h.Set(k, v)
	}
	for k, env := range n.HeaderEnv {
		v := os.Getenv(env)
		if strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("notifier %q: header_env gives header %s the variable %s, which is unset or empty here: export it where the agent runs", n.Name, k, env)
		}
		if strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("notifier %q: the value of %s (header %s) spans lines", n.Name, env, k)
		}
		h.Set(k, v)
	}
	return h, nil
}

// webhookEvents are the event kinds the webhook gets.
func webhookEvents(n *config.Notifier) map[decide.EventKind]bool {
	names := n.Events
	if names == nil {
		names = config.DefaultWebhookEvents
	}
	out := map[decide.EventKind]bool{}
	for k := decide.KindOriginState; k <= decide.LastKind; k++ {
		if slices.Contains(names, k.String()) {
			out[k] = true
		}
	}
	return out
}
