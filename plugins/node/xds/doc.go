// Package xds serves vigil's publication to Envoy, and to any xDS client
// (gRPC's proxyless clients included), with go-control-plane's snapshot
// cache: vigil-node -xds-listen HOST:PORT.
//
// It lives in vigil-node, beside the HAProxy and template drivers, rather
// than in the control plane: Envoy is an edge that the node drives, the
// node already follows the publication (and keeps it across control plane
// outages in -state-dir), reads the other levels from GET /v1/sites, and
// knows each site's ramp, backup level and origins left out; and an
// Envoy's management server on the same machine (or pod) needs no network
// path to the control plane. A Server is an edge.Driver: the edge Hub
// hands it every View, and Apply turns the View into a new snapshot.
//
// What a snapshot holds, every client getting the same one (whatever its
// node id):
//
//   - CDS: one EDS cluster per site, named like HAProxy's backend
//     (View.Site.Backend: -edge-backend-prefix and the site's name),
//     round-robin, with locality weights on, and outlier detection (3
//     consecutive 5xx eject an origin, up to all of them: the backup level
//     then serves until vigil switches). A site with an https origin
//     gets a transport_socket_matches entry: its https origins are reached
//     over TLS with the site's hostname as SNI, their certificate checked
//     against Options.TrustedCA and that name.
//   - EDS: per site, the current level as priority 0 (so level 1 is
//     priority 0 while the site is on it), then the backup level, then the
//     other known levels by number. Each level is one locality
//     (zone "level-N"); each origin an LbEndpoint whose health status is
//     vigil's verdict (HEALTHY, UNHEALTHY, or UNKNOWN before one). During a
//     failback ramp the level being left is a second locality of priority
//     0, and the localities' load_balancing_weight are the ramp's per
//     cents. The overprovisioning factor is so large that a priority keeps
//     its traffic while any of its origins is not unhealthy: the edge
//     leaves the level vigil chose only when vigil judges all of it down.
//     An origin whose host is a name is looked up at each Apply (the Hub
//     applies again every -edge-resync): each address is an endpoint; a
//     name that stops resolving keeps its last addresses.
//   - RDS: one route configuration (Options.RouteName, "vigil") with a
//     virtual host per site, matching its hostname and its name, routing
//     to its cluster. A Host no site has matches none: Envoy answers 404.
//   - LDS: Envoy's HTTP listener (Options.ListenerName "vigil/http" on
//     Options.HTTPListen) routed by that configuration, for an Envoy that
//     asks for its listeners; and one API listener per site, named after
//     it, for gRPC clients that dial xds:///SITE.
//
// A snapshot's version is the publication version and a sequence number
// ("7.3"); a new one is set when the publication version or the resources
// change (the topology read after a publication, a name's addresses), and
// every snapshot is checked first: each resource against the validation
// rules of Envoy's API, the whole with Snapshot.Consistent. An Apply that
// succeeds means the snapshot is in the cache: clients that are connected
// get it at once, but vigil-node does not wait for their ACKs. A client's
// NACK is logged.
//
// The service is plain-text gRPC without authentication: it tells whoever
// connects every origin's address. Keep it on loopback or a private
// network; New warns when it listens elsewhere.
package xds
