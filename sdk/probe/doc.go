// Package probe is the HTTP origin probe of vigil: one GET of an origin's
// address plus the site's health check path, with the site's hostname as the
// Host header and as the TLS server name, judged by the rules of the decision
// contract (spec/decisions.md, section "Probe").
//
// A plugin author fills in a [Request] and calls [Do]. The [Result] says
// whether the origin is up, and if not, why, with a typed [Reason]:
//
//	res, err := probe.Do(ctx, probe.Request{
//		Address: "https://203.0.113.10",
//		Host:    "www.example.com",
//		Path:    "/healthz",
//	})
//	if err != nil {
//		// The request is invalid or ctx ended: the probe did not run,
//		// so cast no vote for this origin.
//	}
//	vote := res.Up
//
// The rules:
//
//   - Any response with a status below 500 is up, 404 included. Redirects
//     are not followed: a 301 is up.
//   - A 5xx status, a connection failure (refused, reset, unreachable, DNS
//     failure), a TLS failure (any certificate verification failure or
//     handshake error) and a timeout are down, each with its own [Reason].
//   - One timeout ([Request.Timeout], 5 s by default) covers DNS, connect,
//     TLS and the response headers, and the body read when a body check is
//     set.
//   - The body is read only when [Request.ExpectedBody] is set, and then at
//     most [BodyLimit] bytes of it. Otherwise the connection is closed as soon
//     as the headers have arrived.
//   - Every probe opens its own connection: nothing is reused between probes,
//     so each one sees the origin as a new visitor would.
//   - Probes go straight to the origin over HTTP/1.1: proxy environment
//     variables (HTTP_PROXY, HTTPS_PROXY) are ignored, and no compression is
//     asked for, so a body check sees the bytes the origin sent.
//   - The stricter checks ([Request.ExpectedStatuses], [Request.ExpectedBody],
//     [Request.MaxLatency]) are opt-in and only ever turn up into down.
//
// [Do] is safe for concurrent use; a source may run many probes at once.
package probe
