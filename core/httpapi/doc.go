// Package httpapi is vigil's HTTP API: site status, operator actions, the event
// journal, the publication long-poll, Prometheus metrics and a health
// check. Each route needs a token of a scope (docs/api.md, "Token
// scopes"): actions always need the operator's token; reads need none,
// or, with read_access = "token", the read or the operator's token (the
// node token reads the sites and the publication only). Every error is
// JSON that names the problem:
//
//	{"error": {"code": "unknown_site", "message": "no site nope"}}
//
// The routes New registers:
//
//	GET  /v1/sites                                 every site (SiteView), paged and filtered
//	GET  /v1/sites/{site}                          one site
//	GET  /v1/sites/{site}/history                  one site's recent verdicts and uptimes
//	GET  /v1/sites/{site}/failovers?limit=N       the site's failover reports, newest first (failovers.go)
//	GET  /v1/summary                               the fleet in a few numbers
//	POST /v1/sites/{site}/switch                   {"level": N}
//	POST /v1/sites/{site}/probe                    a dry-run round (changes nothing)
//	POST /v1/sites/{site}/origins/{origin}/disable
//	POST /v1/sites/{site}/origins/{origin}/enable
//	POST /v1/sites/{site}/drill                    {"level": N, "for": "5m"}: start a failover drill (drill.go)
//	DELETE /v1/sites/{site}/drill                  abort it
//	GET  /v1/sites/{site}/drill                    the site's drill, running or on its way back
//	POST /v1/reload                                read the configuration again, as SIGHUP does (with Options.Reload)
//	GET  /v1/events?site=&after=&limit=&wait=      the journal, oldest first
//	GET  /v1/publication?after=VERSION&wait=30s    long-poll of the publication
//	POST /v1/publication/applied                  a node's acknowledgement: when its edge applied a version (failovers.go)
//	GET  /v1/nodes                                 the sources' own status: the node gateway's online nodes
//	GET  /v1/sources                               the chain's sources: plugin, version, protocol, SDK, capabilities, process, restarts, last error (sources.go)
//	GET  /metrics                                  Prometheus
//	GET  /healthz                                  "ok"
//
// Any other path under /v1/ is a JSON not_found. Beside them, the agent
// serves through Options.Extra the status page (GET / and its files under
// /ui/, package statuspage), and, with an etcd store, core/ha answers
// GET /v1/cluster (this instance's role, the leader, the members) and
// sends a standby's changes to the leader. docs/api.md describes each
// route.
//
// What the routes say about sites (the views, the status filter, the
// summary, the nodes, the events' wire form) is the read model's
// (core/readmodel), built from the engine's snapshot of the last commit,
// so that no read waits for a round.
//
// An action's actor is taken from the X-Vigil-Actor header (the CLI sends
// user@host); the token proves the right to act, the header only says who.
package httpapi
