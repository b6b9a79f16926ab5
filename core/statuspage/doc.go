// Package statuspage is vigil's web status page: one HTML page, its CSS and
// its JavaScript, embedded in the binary and served beside the API by
// Register. It has no build step and loads nothing from other hosts.
//
// The page is a client of the API and nothing else: it reads GET /v1/sites,
// GET /v1/events (long-polled to notice changes at once) and, when the node
// gateway provides it, GET /v1/nodes; it acts through the same POST
// endpoints as the CLI, with the bearer token the operator types in (kept in
// the tab's sessionStorage, never in a URL). Every route it registers is
// outside /v1/, /metrics and /healthz:
//
//	GET /          the page (the site view is /#/site/NAME)
//	GET /ui/NAME   its assets (app.css, app.js, icon.svg)
package statuspage
