// Package api is vigil's HTTP API: site status, operator actions, the event
// journal, the publication long-poll, Prometheus metrics and a health
// check. Mutations need the bearer token; reads are open or need it too, as
// configured. Every error is JSON that names the problem:
//
//	{"error": {"code": "unknown_site", "message": "no site nope"}}
//
// Endpoints:
//
//	GET  /v1/sites                                 every site (SiteView)
//	GET  /v1/sites/{site}                          one site
//	POST /v1/sites/{site}/switch                   {"level": N}
//	POST /v1/sites/{site}/probe                    a dry-run round (changes nothing)
//	POST /v1/sites/{site}/origins/{origin}/disable
//	POST /v1/sites/{site}/origins/{origin}/enable
//	GET  /v1/events?site=&after=&limit=&wait=      the journal, oldest first
//	GET  /v1/publication?after=VERSION&wait=30s    long-poll of the publication
//	GET  /v1/nodes                                 the sources' own status: the node gateway's online nodes
//	GET  /metrics                                  Prometheus
//	GET  /healthz                                  "ok"
//
// An action's actor is taken from the X-Vigil-Actor header (the CLI sends
// user@host); the token proves the right to act, the header only says who.
package api
