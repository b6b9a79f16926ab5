package probe

import "github.com/vigilcdn/vigil/sdk"

// Reason is sdk.Reason: a probe's [Result.Reason] is the vote's reason as
// it is, with no conversion. It was a string type of its own before SDK
// v0.3.0.
//
// Deprecated: write sdk.Reason. The alias stays until SDK v1 for code that
// names probe.Reason; the constants below stay as they are.
type Reason = sdk.Reason

// The reasons a [Result] can carry: the sdk.Reason constants of the same
// names, given here under the names a probe's code reads best with
// (res.Reason == probe.Timeout). OK is the only one that goes with
// Result.Up == true.
const (
	// OK: the origin answered with a status below 500, sent the whole body
	// (up to the cap) within the timeout, and passed every stricter check
	// that was set.
	OK = sdk.ReasonOK
	// HTTP5xx: the origin answered with a status of 500 or more.
	HTTP5xx = sdk.ReasonHTTP5xx
	// ConnectFailed: no usable HTTP exchange took place: the DNS lookup
	// failed, the connection was refused, reset or unreachable, or the
	// origin closed the connection before the end of the response (headers
	// or body) or answered something that is not HTTP.
	ConnectFailed = sdk.ReasonConnectFailed
	// TLSFailed: the TLS handshake failed, including every certificate
	// verification failure (unknown authority or self-signed, expired, not
	// valid for the server name).
	TLSFailed = sdk.ReasonTLSFailed
	// Timeout: the whole response, headers and body up to the cap, did not
	// arrive within the request's timeout. Result.Phase says which stage
	// was still under way: an origin that sends its headers and then stalls
	// or drips its body is a Timeout in PhaseBody.
	Timeout = sdk.ReasonTimeout
	// UnexpectedStatus: the status was below 500 but not one of
	// Request.ExpectedStatuses.
	UnexpectedStatus = sdk.ReasonUnexpectedStatus
	// BodyMismatch: Request.ExpectedBody was not found in the body (in its
	// first Request.MaxBody bytes when it is longer).
	BodyMismatch = sdk.ReasonBodyMismatch
	// TooSlow: the response headers arrived later than Request.MaxLatency.
	TooSlow = sdk.ReasonTooSlow
	// OffHostRedirect: with Request.FollowRedirects set, the origin
	// redirected to another scheme, host or port (or to a Location that is
	// not a URL). A visitor sent there is not served by this origin.
	OffHostRedirect = sdk.ReasonOffHostRedirect
	// TooManyRedirects: with Request.FollowRedirects set, the origin was
	// still redirecting after MaxRedirects redirects.
	TooManyRedirects = sdk.ReasonTooManyRedirects
)
