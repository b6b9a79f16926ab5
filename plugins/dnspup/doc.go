// Package dnspup is the vigil-source-dnspup vote source: one vote per dnspup
// checkpoint per origin, through the dnspup Customer API v1 (package api).
// It is meant to run second in the chain with tally = "carry", so that its
// checkpoint votes add to the operator's node votes.
//
// # Settings (the source's config { } block)
//
//	api_base           string    API root                                   "https://api.dnspup.com"
//	api_key_env        string    env var holding the API key                "DNSPUP_API_KEY"
//	api_secret_env     string    env var holding the API secret             "DNSPUP_API_SECRET"
//	checkpoints        [string]  node ids that vote (checked against GET /v1/nodes)
//	checkpoint_count   number    nodes picked when checkpoints is unset     3
//	ip_version         string    "4" or "6"                                 "4"
//	request_timeout    duration  deadline of one API request                "8s"
//	requests_per_round number    most API requests per round (the budget)   10
//	concurrency        number    most API requests in flight                2
//	batch_size         number    targets per batch-probes request; 1 = one POST /v1/probes per target   10
//	quota_backoff      duration  no calls for this long after quota_exceeded "1h"
//
// vigil passes a plugin only the environment variables listed in the
// source's env = [...]: list both credential variables there. Configure
// fails, naming the variable (never its value), when either is empty; and
// fails naming the id and listing the available ones when a checkpoint is
// not in GET /v1/nodes. With checkpoint_count, online nodes are picked in id
// order, one per country first.
//
// # What the checkpoints probe
//
// Each origin becomes the URL address + health check path (for example
// https://203.0.113.10/cdn-health) and is sent as the probe target, type
// "http", method GET, count 1, with nodeIds = the checkpoints. The API takes
// a target URL and nothing else: it cannot set a Host header, a TLS server
// name, a User-Agent, request headers or a timeout, and returns no body. So
// dnspup checkpoints probe the origin address as given, from the public
// internet, with whatever Host the URL implies. Consequences for operators:
// an origin that routes by Host may answer the bare address differently than
// the site; an https origin addressed by IP must present a certificate valid
// for that address (or the checkpoints report a TLS failure and vote down);
// only publicly reachable origins can be judged. Expected statuses and a
// latency limit are applied to what the checkpoints report.
//
// # Health checks dnspup cannot perform
//
// Where the checkpoints would judge something other than what the site's
// health_check asks for, the source does not send the origin at all and
// casts one Abstain vote with reason unsupported, whose detail names the
// settings (a warning is logged once per origin until the next Configure):
//
//	expected_body                     the API returns no response body
//	headers                           no request header can be sent (an origin that needs a token would answer 401, which counts as up)
//	ca_file (https)                   the checkpoints trust the public roots only: a private CA would read as a TLS failure, a down
//	tls_server_name (https)           unless it is the address's host: the checkpoints send and verify the URL's host
//	insecure_skip_tls_verify (https)  the checkpoints always verify: a certificate the operator accepts would read as down
//	follow_redirects                  the checkpoints do not follow redirects: a redirect to a failing page would count as up
//
// TLS settings on an http address do not apply and are ignored, as is
// max_body (it bounds a body check, which never runs here). The Host
// header, the User-Agent and the probe timeout are never sent: every target
// has them, so they are the limits described in the previous section, not
// reasons to abstain (or dnspup would judge no origin).
//
// # Votes
//
// Each configured checkpoint that answered votes once per origin, as
// voter "dnspup:<node id>": up for a status below 500; down for a 5xx, a
// timeout, a connection or TLS failure or any other error the checkpoint
// reports. A checkpoint that reports its own trouble, or nothing usable,
// does not vote (see customerapi/results.go). Origins sharing one URL are probed
// once.
//
// An origin the source does not judge in a round gets one Abstain vote
// (never tallied, counted by vigil per source and reason, shown in
// `vigil probe`) as voter "dnspup" (AbstainVoter): no checkpoint looked at
// it, so the vote names the source. Its reason is unsupported (above),
// over_budget or out_of_time (below). Source.Abstentions counts the same
// targets under the same labels.
//
// # Budget
//
// A round sends at most requests_per_round requests, batch_size targets
// each, concurrency at once. The origins beyond the budget get an Abstain
// over_budget, and one warning per round gives their count. What is cut
// rotates: each round asks first for the URLs asked least recently (never
// asked before all others, ties in ballot order), so an origin cut in one
// round comes before every origin asked in that round in the next. With a
// steady ballot of N URLs of which C fit in a round this is round-robin:
// every origin gets votes at least once every ceil(N/C) rounds, also when
// origins come and go between rounds (which would make a moving offset skip
// some), and without the luck a per-round shuffle depends on.
//
// # Time
//
// vigil gives the call a deadline (the source's share of the round). The
// source stops at a soft deadline a little before it (a tenth of the time
// left, at most a second, as the direct source does). Each request's
// timeout is the smaller of request_timeout and the time left before the
// soft deadline; a request with less than 100ms left is not sent (it would
// cost quota for nothing). The origins of requests that could not start, or
// were still in flight at the soft deadline, get an Abstain out_of_time,
// never a down nor an error, with one warning per round; they are asked
// first next round. A request that outlives request_timeout itself is an
// API failure (below). Vote does not wait for a request that ignores its
// cancellation past halfway from the soft deadline to the call's: a slow
// or stuck API cannot make it overrun.
//
// # API errors
//
// On an API error the targets of that request get no votes, with a logged
// reason and a counter (Source.Abstentions):
//
//	400 invalid_*              not retried
//	401 unauthorized           alert-level log; no more calls until vigil reconfigures the source
//	403, 409                   logged as an account problem
//	429 quota_exceeded         no calls for quota_backoff (or Retry-After, if longer)
//	429 rate_limited, capacity no calls until Retry-After (30s if absent) plus jitter
//	503 service_unavailable    abstain this round
//	network failure            a POST is never retried once it may have been sent
//
// Rate-limited targets get an Abstain out_of_time with plugin reason
// dnspup/rate_limited. When a round casts no up or down vote at all
// because of the API, Vote returns an error (and so no abstentions) so that
// vigil counts the source's failure.
//
// # Asynchronous results and quota
//
// A probe answered 202 Accepted is polled by its id until the soft
// deadline; if its result is not ready by then its targets get an Abstain
// out_of_time with plugin reason dnspup/pending, one warning per round, and
// no error. Source.QuotaSpend counts the POSTs dnspup accepted ("spent")
// and those sent without an answer ("uncertain"); Source.Metrics sends
// them, and the source's other counters, to vigil with each answer, which
// shows them as vigil_plugin_dnspup_quota_requests_total and the like. README.md lists every
// assumption about the real API and what happens when one is wrong.
package dnspup
