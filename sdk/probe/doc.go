// Package probe is the HTTP origin probe of vigil: one GET of an origin's
// address plus the site's health check path, with the site's hostname as the
// Host header and as the TLS server name, judged by the rules of the decision
// contract (the repository's docs/decisions.md, section "The probe").
//
// A plugin author fills in a [Request] and calls [Do]. The [Result] says
// whether the origin is up, and if not, why, with an sdk.Reason, and at
// which stage, with a [Phase]:
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
//   - The probe judges the whole response, as a visitor gets it: the
//     status, and then the body, read to its end. Any status below 500 is
//     up, 404 included, once the body has arrived.
//   - A 5xx status, a connection failure (refused, reset, unreachable, DNS
//     failure, or the origin hanging up before the end of the response), a
//     TLS failure (any certificate verification failure or handshake error)
//     and a timeout are down, each with its own reason ([Timeout], [TLSFailed]...).
//   - One timeout ([Request.Timeout], 5 s by default) covers the DNS lookup,
//     connect, TLS handshake, response headers and the body, and every
//     redirect followed. An origin that sends its headers and then stalls,
//     or drips its body slower than that, is down with [Timeout]. The
//     result's Phase says which stage the timeout cut short ("dns",
//     "connect", "tls", "headers" or "body"), and so does its Detail, for
//     example "timeout during the TLS handshake (2s)".
//   - The body is read up to a cap ([Request.MaxBody], [DefaultMaxBody] =
//     1 MiB by default) and discarded as it is read: a probe holds one small
//     buffer whatever the body's size. A longer body, even an endless one,
//     is not a failure: at the cap the probe stops reading, closes the
//     connection and judges on what it has read. [Result.BodyBytes] says how
//     much that was.
//   - Once the headers decide that the probe is down (a 5xx, an unexpected
//     status, a slow answer) the body is not read.
//   - Redirects are not followed unless [Request.FollowRedirects] is set: a
//     301 is up, like any status below 500, once its body has arrived. With
//     it set, redirects that stay on the origin (same scheme and port, host
//     the site's or the address's) are followed, each on a new connection to
//     the address, at most [MaxRedirects] of them; a redirect anywhere else
//     is down with [OffHostRedirect].
//   - Over https the probe offers HTTP/2 and HTTP/1.1 (ALPN) and speaks
//     whichever the origin picks; plain http is HTTP/1.1. [Result.Proto]
//     says which was spoken.
//   - Every probe opens its own connection, used for one request and
//     closed: nothing is pooled or reused between probes, even to the same
//     address, so each one sees the origin as a new visitor would, with its
//     own Host and TLS server name.
//   - Probes go straight to the origin: proxy environment variables
//     (HTTP_PROXY, HTTPS_PROXY) are ignored, and no compression is asked
//     for, so a body check sees the bytes the origin sent. Response headers
//     larger than 256 KiB are a failure.
//   - The stricter checks ([Request.ExpectedStatuses], [Request.ExpectedBody],
//     [Request.MaxLatency]) are opt-in and only ever turn up into down.
//     MaxLatency is compared with [Result.Latency], the time until the
//     response headers arrived; [Result.Duration] is the whole probe.
//   - The settings an operator may need are opt-in too: extra request
//     headers ([Request.Header]), a private CA ([Request.RootCAs]), a TLS
//     name other than the site's for an origin whose certificate names
//     itself ([Request.ServerName]) and, for tests and emergencies only, no
//     certificate check at all ([Request.InsecureSkipVerify]).
//   - A Result's Detail is safe to log: it never quotes the path, query,
//     header values or any credential, and neither do the errors of an
//     invalid request.
//
// [Do] is safe for concurrent use; a source may run many probes at once.
//
// From a Result to a vote: [Result.Reason] is an sdk.Reason (the
// constants of this package are sdk.Reason values), the vote's reason as
// it is. An https Result carries the origin's leaf
// certificate ([Result.PeerCertificate], [Result.CertNotAfter]): a plugin
// that reports certificates expiring soon votes with the standard reason
// and a namespaced sdk.Vote.PluginReason of its own.
package probe
