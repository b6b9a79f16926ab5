// Package edge drives the edge software a CDN already runs (HAProxy,
// nginx, Varnish, Traffic Server...) from vigil's publication, so that an
// operator keeps their edge and vigil only tells it which origins to use.
//
// vigil-node hands every publication it applies to a Hub, which turns it
// into a View (one entry per site: the current level's enabled origins, the
// next level's as backups, and the other levels' as known servers) and
// passes the newest View to each Driver in its own goroutine. A driver that
// fails is retried with backoff on the newest View; the edge keeps its last
// good state meanwhile. Three drivers ship here (the Envoy xDS server,
// plugins/node/xds, is a fourth):
//
//   - HAProxy (NewHAProxy): live, through the Runtime API (the stats
//     socket), with no reload. One backend per site; the current level's
//     origins are ready servers, the others in maintenance; servers are
//     added and re-addressed at run time (HAProxy 2.4 or later). Each
//     origin also has a backup server (NAME:backup, HAProxy's backup flag,
//     which cannot change at run time): the next level's are ready, so
//     that HAProxy serves from them on its own when its checks find every
//     current server down, until vigil switches (DefaultHAProxyServerArgs
//     has the checks). The driver is a Watcher: a reload or restart of
//     HAProxy (a new pid in show info) drops the added servers, and the
//     Hub applies the publication again at once. Where the
//     runtime cannot do it (the backend is not declared, or the HAProxy is
//     too old for add server), a fallback Template renders the whole
//     configuration and reloads it gracefully. A server it added whose
//     origin left every level of its site (or whose site left the
//     publication) is deleted with del server, see below.
//   - Template (NewTemplate): Go text/templates rendered from the View into
//     files, written atomically, then a check command and a reload command,
//     at most one reload per minimum interval. A failing check leaves the
//     old file in place and reports the failure.
//   - Varnish (NewVarnishAdmin): live, through varnishd's management port
//     (the protocol varnishadm speaks, authenticated with the -S secret).
//     It loads one VCL holding every known level of every site (a
//     fallback director over the levels in order) and switches levels with
//     backend.set_health alone: the levels before the current one sick,
//     the others auto, so that the probes let Varnish fall over to the
//     next level on its own. A VCL is compiled only when it changes (an
//     origin or a site comes or goes, a ramp's weights), never at a plain
//     level switch.
//
// The shipped templates (plugins/node/templates) cover nginx, HAProxy,
// Varnish (a VCL reloaded with varnishreload), Caddy and Apache Traffic
// Server (parent.config and remap.config, reloaded with traffic_ctl config
// reload).
//
// During a failback ramp (a publication's Site.Ramp) the View's Site.Ramp
// holds the level being left and its origins, and every served origin a
// Weight: the per-server weight that gives the current level Ramp.Weight
// per cent of the requests and the level being left the rest under
// weighted round-robin (Ramp.Weight and 100 - Ramp.Weight themselves when
// both levels have as many origins). The HAProxy driver keeps the level
// being left's servers ready and sets both levels' weights (`set server
// B/S weight N`), then restores the initial weights when the ramp ends;
// the shipped templates write the weights on both levels' servers
// (nginx's weight=, HAProxy's weight).
//
// Removal from HAProxy. An origin in none of its site's levels (removed
// or disabled in the configuration, or its whole site out of the
// publication) has its server put in maintenance at once: new requests go
// elsewhere, requests in flight end normally. The HAProxy driver deletes
// only the servers it added itself: every add server it sends carries
// `id N` with N from 1000000000, and only a server whose forced srv_id is
// that high is deleted (HAProxy 2.6's del server would delete a server
// of haproxy.cfg too, and both are named after their origin). Such a
// server is deleted at the first Apply once it has been in maintenance
// for HAProxyOptions.RemoveAfter (default one minute: the View built just
// after a start, before the topology comes in, does not know the other
// levels) and HAProxy accepts: del server is refused while the server
// has a session, a queued request or an idle connection. A refusal is
// logged (HAProxyOptions.Log) and listed by Removals; the server stays in
// maintenance and the deletion is tried again at every later Apply,
// which does not fail for it. The requests in flight win: sessions are
// cut (shutdown sessions server) only when HAProxyOptions.DrainTimeout is
// set, once the server has been in maintenance that long. A site out of
// the publication keeps its backend; its configuration servers go to
// maintenance once, and are then left to the operator. Only backends of
// the sites this process applied are touched.
//
// The View's levels other than the current one come from the control
// plane's GET /v1/sites (Topology), fetched after each publication; without
// it the View knows only the published level and the levels seen before.
package edge
