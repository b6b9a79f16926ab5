// Package proxy is vigil-node's reverse proxy: it serves visitor traffic for
// every site of the current publication, picked by the Host header, and
// sends each request to one of the enabled origins of the site's current
// level, as the control plane published it.
//
// The node's own judgement never changes the level: passive failure
// tracking and retries choose among the current level's origins, and only
// when all of them fail does a request go to the backup level the control
// plane published (below), until the control plane switches.
//
// # Serving
//
// Server is how vigil-node's -proxy-listen serves a Proxy: a
// net/http.Server whose handler is the Proxy, which is also an
// http.Handler for any other server. Each request goes through
// httputil.ReverseProxy, whose transport runs the attempts (pick an
// origin, try it, judge the outcome, retry) over a keep-alive
// http.Transport per site. The data plane's speed is the edge software's
// job (HAProxy, nginx and the others vigil-node drives): the proxy is the
// standard library's, for demos and small sites, and its figures beside
// HAProxy's are in plugins/node/README.md.
//
// # Choosing an origin
//
// Requests go round-robin over the current level's origins that are neither
// skipped (below) nor judged unhealthy by the control plane. When none is
// left, origins the control plane judges unhealthy are used, and when every
// origin is skipped too, all of them are: a skip is a hint, never a reason to
// refuse traffic. An unknown Host gets 421 Misdirected Request; a node with
// no publication yet answers 503.
//
// # The backup level
//
// A site's publication may carry a Backup: the level the control plane
// would fail over to next, with its origins that are not unhealthy
// (publication.Site.Backup). Between the moment a level's origins fail and
// the control plane's switch (its unhealthy_threshold rounds, a minute or
// more by default) the current level cannot answer; nginx with the next
// level as "backup" servers answers from them meanwhile, and so does the
// proxy. A backup origin is picked only when every origin of the current
// level (and, during a ramp, of the level being left) is skipped or was
// already tried by this request, and a skipped backup origin only when
// every origin is skipped: the current level is never bypassed while one
// of its origins may answer. A first attempt goes to the backup when the
// current level is all skipped, whatever the method (it is sent once); a
// retry goes there within the same Retries and RetryBudget, and only for a
// request that may be retried at all (below), so a POST is never retried
// there. Measured through a real vigil-node with level 1 answering 503 or
// refusing connections, 1,000 GETs at about 50 a second before the switch:
// 4 failed (0.4%), against every one without a backup (the e2e test
// TestBackupDuringDetectionWindow in plugins/node). Requests the backup
// answered are counted, and the first of each publication is logged.
//
// # Passive failure tracking
//
// A failure is a connection error, a timeout (connect, or response headers)
// or a 502, 503 or 504 answer. An origin with FailCount failures within
// FailWindow is skipped for SkipFor. Defaults: 3 failures in 10s, skipped
// for 10s. When the skip ends the origin is on probation until it answers:
// one failure within FailWindow of the skip's end skips it again at once
// (nginx, likewise, keeps a server's failures until it answers), so an
// origin that stays down costs one failed attempt per SkipFor, not
// FailCount. For comparison: nginx marks a server down after max_fails=1
// failure within fail_timeout=10s, for 10s; HAProxy's observe layer7 with
// error-limit defaults to 10 errors; Envoy's outlier detection ejects after 5
// consecutive 5xx for a base 30s (growing with each ejection). vigil-node
// sits between them: one failure is often a single bad connection (nginx's
// 1 is known to be jumpy), while the control plane already judges real
// health every round, so the node only needs to smooth over a burst, and
// skipping for long would pile a level's traffic on fewer origins for no
// reason the control plane agrees with. 10s is shorter than a round (30s by
// default), so the control plane's verdict takes over quickly.
//
// # Retries
//
// A failed request is retried on another origin of the current level (never
// the same one twice; another level only as said above: the level being
// left during a ramp, the backup level once the current one is used up)
// when all of these hold:
//
//   - the method is idempotent per RFC 9110 section 9.2.2: GET, HEAD,
//     OPTIONS, TRACE (the safe methods) and PUT, DELETE. Repeating them has
//     the same effect on the origin as sending them once, so a retry cannot
//     double an effect even if the first attempt reached the origin. POST
//     and PATCH (and any other method) are never retried;
//   - the body can be replayed: no body, or one of at most MaxReplayBody
//     bytes (default 64 KiB), which is buffered. Larger bodies are streamed
//     and their requests are not retried;
//   - fewer than Retries retries were made (default 1: a second origin, as
//     Envoy's default retry policy; HAProxy's default is 3 connection
//     retries, nginx's proxy_next_upstream_tries is unlimited);
//   - less than RetryBudget has passed since the request arrived (default
//     10s; nginx's proxy_next_upstream_timeout is unlimited by default, which
//     lets a visitor wait for every origin's timeout in turn).
//
// When no retry is possible, the last failing answer is passed on (a 5xx as
// the origin sent it; 502 for a connection failure or a timeout).
//
// # Metrics
//
// Registered on Options.Registerer, labelled by site and origin names from
// the publication (so bounded by the configuration, never by what visitors
// send): vigil_node_proxy_requests_total{site,code},
// vigil_node_proxy_retries_total{site},
// vigil_node_proxy_backup_requests_total{site} (requests answered by a
// backup origin),
// vigil_node_proxy_origin_skips_total{site,origin},
// vigil_node_proxy_origin_errors_total{site,origin,outcome} and
// vigil_node_proxy_request_duration_seconds{site}.
package proxy
