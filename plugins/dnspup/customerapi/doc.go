// Package customerapi is a small client for the dnspup Customer API v1: Health,
// Nodes, Probe (POST /v1/probes) and BatchProbe (POST /v1/batch-probes).
//
// Credentials travel only in the X-API-Key and X-API-Secret headers. They
// are held in a Secret, which prints as "[redacted]", and are scrubbed from
// every message the server sends back, so they never reach a log line or an
// error string.
//
// Errors from the API arrive as {"error":{"code":…,"message":…}} and are
// returned as *Error. Callers branch on Error.Class (derived from the code,
// falling back on the HTTP status when the code is unknown), never on the
// message:
//
//	ClassInvalid      400 invalid_request, invalid_nodes, trusted_dns_resolution_failed: do not retry
//	ClassUnauthorized 401 unauthorized: stop and alert
//	ClassForbidden    403 source_forbidden, target_restricted, tool_not_allowed
//	ClassEntitlement  409 entitlement_exceeded
//	ClassQuota        429 quota_exceeded: do not retry soon
//	ClassRateLimited  429 rate_limited, capacity_limited: honour Retry-After with jitter
//	ClassUnavailable  503 service_unavailable
//
// Retries (hashicorp/go-retryablehttp) follow the quota rule that every
// accepted request costs quota. GETs are retried on network errors, 5xx and
// rate limits. POSTs are retried only when no request can have been accepted:
// a failed dial, a 503 service_unavailable envelope, or a 429
// rate_limited/capacity_limited envelope. A POST is never retried after a
// network timeout or a broken connection. A Retry-After is always honoured
// (plus jitter); when it is longer than the client's RetryWaitMax, or does not
// fit before the context deadline, the client returns the *Error with
// RetryAfter set instead of waiting, and the caller holds off.
//
// Pagination: Nodes follows the pages of GET /v1/nodes (a Link rel="next"
// header, a next_cursor in the body sent back as ?cursor=, or a next link in
// the body; see nextPage in nodes.go) up to Config.MaxPages, and fails
// naming that bound past it. A page that points back to an earlier one is an
// error, and a link to another host is never followed.
//
// Asynchronous results: a probe answered 202 Accepted {"id": …} (it was
// accepted and cost quota) is polled with GET /v1/probes/{id} (or the
// Location header's path) every Config.PollInterval, or the answer's
// Retry-After, until an answer other than 202 or until the context is done;
// then the error is a *PendingError. The POST itself is never resent; a
// poll is a GET, retried like one.
//
// The mapping from the (publicly undocumented) probe responses to
// per-checkpoint results lives in results.go, which documents the JSON shape
// assumed.
package customerapi
