// Package publication is the wire form of what the vigil control plane
// publishes to nodes and publishers: a versioned snapshot of every site's
// current level and that level's enabled origins, and a client that follows
// it through the long-poll endpoint GET /v1/publication?after=VERSION.
//
// Besides the current level, a site may carry a Ramp (a failback in
// progress: the level being left keeps part of the traffic) and a Backup
// (the level the control plane would fail over to next). A reader that
// serves traffic itself, such as vigil-node's proxy, may send a request
// that every origin of the current level failed to the Backup's origins,
// as nginx does with its "backup" servers, so that visitors see no errors
// in the rounds before the control plane switches. A reader that publishes
// the site's origins elsewhere (DNS answers, a load balancer's pool)
// publishes the current level (and the Ramp's split), never the Backup.
//
// A reader that applies the publication may acknowledge each version
// (Follower.Acknowledge, an Applied): when it applied it and what it saw of
// the levels it left. The control plane builds its failover reports from
// them; a reader that does not send them is shown as "not reported".
//
// A node agent or a third-party publisher imports this package (it is part
// of the SDK and imports nothing from vigil's core).
package publication
