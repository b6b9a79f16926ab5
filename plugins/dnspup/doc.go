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
// name, a User-Agent or a timeout. So dnspup checkpoints probe the origin
// address as given, from the public internet, with whatever Host the URL
// implies. Consequences for operators: an origin that routes by Host may
// answer the bare address differently than the site; an https origin
// addressed by IP must present a certificate valid for that address (or the
// checkpoints report a TLS failure and vote down); only publicly reachable
// origins can be judged. A site with an expected body text gets no dnspup
// votes (the API does not return bodies); expected statuses and a latency
// limit are applied to what the checkpoints report.
//
// # Votes
//
// Each configured checkpoint that answered votes once per origin, as
// voter "dnspup:<node id>": up for a status below 500; down for a 5xx, a
// timeout, a connection or TLS failure or any other error the checkpoint
// reports. A checkpoint that reports its own trouble, or nothing usable,
// does not vote (see api/results.go). Origins sharing one URL are probed
// once.
//
// # Budget and API errors
//
// A round sends at most requests_per_round requests, batch_size targets
// each, concurrency at once; targets beyond the budget get no votes (logged,
// counted as over_budget). On an API error the targets of that request get
// no votes, with a logged reason and a counter (Source.Abstentions):
//
//	400 invalid_*              not retried
//	401 unauthorized           alert-level log; no more calls until vigil reconfigures the source
//	403, 409                   logged as an account problem
//	429 quota_exceeded         no calls for quota_backoff (or Retry-After, if longer)
//	429 rate_limited, capacity no calls until Retry-After (30s if absent) plus jitter
//	503 service_unavailable    abstain this round
//	network failure            a POST is never retried once it may have been sent
//
// When a round casts no vote at all because of the API, Vote also returns an
// error so that vigil counts the source's failure.
package dnspup
