package customerapi

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error codes of the dnspup Customer API v1.
const (
	CodeInvalidRequest             = "invalid_request"
	CodeInvalidNodes               = "invalid_nodes"
	CodeTrustedDNSResolutionFailed = "trusted_dns_resolution_failed"
	CodeUnauthorized               = "unauthorized"
	CodeSourceForbidden            = "source_forbidden"
	CodeTargetRestricted           = "target_restricted"
	CodeToolNotAllowed             = "tool_not_allowed"
	CodeEntitlementExceeded        = "entitlement_exceeded"
	CodeQuotaExceeded              = "quota_exceeded"
	CodeRateLimited                = "rate_limited"
	CodeCapacityLimited            = "capacity_limited"
	CodeServiceUnavailable         = "service_unavailable"
)

// Class is what a caller should do about an *Error.
type Class int

const (
	// ClassUnknown is an error that matches no row of the table.
	ClassUnknown Class = iota
	// ClassInvalid (400): the request is wrong; do not retry it.
	ClassInvalid
	// ClassUnauthorized (401): the credentials are wrong; stop calling and alert.
	ClassUnauthorized
	// ClassForbidden (403): the account may not do this.
	ClassForbidden
	// ClassEntitlement (409): the plan does not allow this.
	ClassEntitlement
	// ClassQuota (429 quota_exceeded): the monthly quota is spent; do not retry soon.
	ClassQuota
	// ClassRateLimited (429 rate_limited, capacity_limited): wait for
	// Retry-After (with jitter) before the next request.
	ClassRateLimited
	// ClassUnavailable (503): the service is down for now.
	ClassUnavailable
)

var classNames = [...]string{"unknown", "invalid", "unauthorized", "forbidden", "entitlement", "quota", "rate_limited", "unavailable"}

// String returns a short name usable as a metric label.
func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return "unknown"
	}
	return classNames[c]
}

// ClassOf maps an error code (and, when the code is not one the API
// documents, the HTTP status) to its Class.
func ClassOf(code string, status int) Class {
	switch code {
	case CodeInvalidRequest, CodeInvalidNodes, CodeTrustedDNSResolutionFailed:
		return ClassInvalid
	case CodeUnauthorized:
		return ClassUnauthorized
	case CodeSourceForbidden, CodeTargetRestricted, CodeToolNotAllowed:
		return ClassForbidden
	case CodeEntitlementExceeded:
		return ClassEntitlement
	case CodeQuotaExceeded:
		return ClassQuota
	case CodeRateLimited, CodeCapacityLimited:
		return ClassRateLimited
	case CodeServiceUnavailable:
		return ClassUnavailable
	}
	switch status {
	case http.StatusBadRequest:
		return ClassInvalid
	case http.StatusUnauthorized:
		return ClassUnauthorized
	case http.StatusForbidden:
		return ClassForbidden
	case http.StatusConflict:
		return ClassEntitlement
	case http.StatusTooManyRequests:
		// Unknown 429 code: the safe reading is "wait", not "hammer".
		return ClassRateLimited
	case http.StatusServiceUnavailable:
		return ClassUnavailable
	}
	return ClassUnknown
}

// Error is an error answer of the API (any non-2xx status).
type Error struct {
	// Op is the request, e.g. "POST /v1/probes".
	Op string
	// Status is the HTTP status code.
	Status int
	// Code is error.code of the envelope; empty when the body had none.
	Code string
	// Message is error.message of the envelope, with the credentials
	// scrubbed out. For people only: never branch on it.
	Message string
	// RetryAfter is the parsed Retry-After header; 0 when absent.
	RetryAfter time.Duration
}

// Class is what to do about the error; see the package doc.
func (e *Error) Class() Class { return ClassOf(e.Code, e.Status) }

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dnspup api: %s: HTTP %d", e.Op, e.Status)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	if hint := e.hint(); hint != "" {
		fmt.Fprintf(&b, "; %s", hint)
	}
	return b.String()
}

func (e *Error) hint() string {
	switch e.Class() {
	case ClassUnauthorized:
		return "check the API key and secret"
	case ClassQuota:
		return "the monthly quota is spent; raise it with dnspup or lower requests_per_round"
	case ClassForbidden, ClassEntitlement:
		return "the dnspup account does not allow this request; check the plan and the target"
	}
	return ""
}

// envelope is the documented error body.
type envelope struct {
	Error *struct {
		Code    any `json:"code"`
		Message any `json:"message"`
	} `json:"error"`
}

// parseError builds an *Error from a non-2xx answer. scrub removes the
// credentials from any text taken from the body.
func parseError(op string, status int, header http.Header, body []byte, scrub func(string) string) *Error {
	e := &Error{Op: op, Status: status}
	var env envelope
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		e.Code = textOf(env.Error.Code)
		e.Message = textOf(env.Error.Message)
	}
	if e.Message == "" {
		e.Message = strings.ToLower(http.StatusText(status))
	}
	e.Code = scrub(e.Code)
	e.Message = scrub(truncate(e.Message, 300))
	if ra, ok := ParseRetryAfter(header.Get("Retry-After"), time.Now()); ok {
		e.RetryAfter = ra
	}
	return e
}

func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ParseRetryAfter reads a Retry-After header value: delay-seconds or an
// HTTP date (relative to now). It reports false when the value is absent or
// unreadable. A date in the past yields 0, true.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 || secs > 1e7 {
			return 0, false
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

// WithJitter returns d plus a random extra of up to a tenth of d plus 250ms,
// so that many clients told to wait the same time do not come back at the
// same instant. It never returns less than d.
func WithJitter(d time.Duration) time.Duration {
	if d < 0 {
		d = 0
	}
	spread := d/10 + 250*time.Millisecond
	return d + rand.N(spread)
}
