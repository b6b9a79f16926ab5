// Package statuspage is vigil's web status page: one HTML page, its CSS and
// its JavaScript, embedded in the binary and served beside the API by
// Register. It has no build step and loads nothing from other hosts.
//
// The page is a client of the API and nothing else: it reads GET /v1/sites,
// GET /v1/events and, where the node gateway provides it, GET /v1/nodes
// ({"nodes":[{"id","labels","source","last_seen"}]}; a 404 hides the
// section), and GET /v1/sources, whose sources that failed their latest
// round (failing_rounds > 0) show in a banner above the list, each with
// its last error. It acts through the same POST endpoints as the CLI, with the
// bearer token the operator types in (kept in the tab's sessionStorage,
// never in a URL), after a confirmation that spells out the consequence.
//
// The list is a summary bar (GET /v1/summary: the sites by status, each a
// filter; off the top level; every level unhealthy; failback waiting), a
// search by name prefix, and one compact row per site, the sites that need
// attention first. A row opens into the site's card, which then reads GET
// /v1/sites/{site}/history (only for open rows and the site view, never for
// the fleet) and draws per origin the last rounds' verdicts as a strip, the
// 1 h / 24 h / 7 d uptimes, a latency sparkline and the counter as pips
// against its threshold (plain SVG). An agent without history says so.
//
// It stays current two ways: a long-poll of GET /v1/events?wait=25s returns
// the moment anything happens (an origin changes state, a level switches,
// an operator acts) and the page re-reads /v1/sites at once; votes,
// verdicts and reasons change every round without an event, so /v1/sites
// is also re-read every 4 s while the tab is visible. Both are cheap for
// the agent: the views are an in-memory snapshot and the long-poll waits on
// the journal without work.
//
// Every route it registers is outside /v1/, /metrics and /healthz:
//
//	GET /          the page (the site view is /#/site/NAME or /?site=NAME)
//	GET /ui/NAME   its assets (app.css, app.js, icon.svg)
package statuspage
