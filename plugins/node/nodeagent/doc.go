// Package nodeagent is vigil-node, the agent on each of the operator's edge
// nodes (the binary is cmd/vigil-node).
//
// It does up to three jobs, each turned on by its flag:
//
//   - With -gateway it attaches to vigil-source-node over one gRPC stream
//     (token and/or mTLS), heartbeats, and runs the probe batches the
//     gateway pushes with sdk/probe, answering before the batch's budget
//     ends. A broken link is retried with exponential backoff (0.5s doubling
//     to 30s) and equal jitter; a refused node (wrong token, id in use, bad
//     certificate) is logged as an error and retried the same way, so that
//     fixing the gateway side needs no restart of the nodes.
//   - With -control-plane it follows the publication by long-polling GET
//     /v1/publication?after=V (sdk/publication.Follower): a switch reaches
//     the node as soon as the control plane publishes it, with no polling
//     interval. Every snapshot is written atomically to -state-dir and loaded
//     at start, so the node keeps serving the last known levels while the
//     control plane is away, across its own restarts too. Given a cluster's
//     agents (-control-plane A,B,C), it follows the one GET /v1/cluster
//     says leads, moves at once to another that answers when it fails, and
//     never goes back to an older version unless the acting leader (or a
//     lone agent) offers it (follow.go, cluster.go). Given a cluster's
//     gateways (-gateway GA,GB,GC), it attaches to each.
//   - With -proxy-listen it serves visitor traffic through package proxy,
//     for every published site, picked by Host header.
//
// -metrics-listen serves Prometheus metrics: the proxy's, plus
// vigil_node_gateway_attached, vigil_node_probe_jobs_total{result} (up,
// down, not_run for jobs out of time, invalid) and
// vigil_node_publication_version / vigil_node_publication_errors_total,
// vigil_node_build_info (Config.Build); every counter exists at 0 from the
// start, a site's proxy counters from the first publication that has it.
// The same listener answers GET /healthz (the process serves) and GET
// /readyz (listeners up, a publication in use, the edges' last apply
// succeeded: health.go).
//
// When Run's context ends, the proxy drains: its listener closes and the
// requests in flight get Config.DrainTimeout to end. The Set* methods of
// reload.go swap the TLS configurations and the probes' roots in a running
// agent (vigil-node's SIGHUP), for the connections opened next.
//
// # Acknowledgements
//
// For every version it follows, the node tells the control plane it came
// from when its edge applied it (POST /v1/publication/applied, through
// publication.Follower.Acknowledge; applied.go): when its proxy took it,
// or, when it drives edges, when every edge applied it or the first
// refused it (with the error). For each site whose level the version
// changed, it adds the last time its proxy sent a request to the level
// left and its passive windows' counts of that level's origins. The
// control plane builds its failover reports from them (vigil's
// docs/failover-time.md). A control plane the node starts following (at
// its start, once it answers again, after a move to another) is told
// the version served, so that a restarted agent knows its nodes before
// its next failover. The sends never delay the publication; a control
// plane that takes none (404) is not asked again.
//
// # Running a batch
//
// Every job of a batch may be in flight at once: a black-holed origin
// costs a socket and a goroutine while it waits, so a batch of black holes
// ends in about one probe timeout. -concurrency (default 4096) bounds the
// probes in flight over all batches, and so does the open-file limit (less
// a reserve of 64, and half of the rest when the proxy runs). The starts
// are spread over -spread (default 0.1) of the batch's time, never so late
// that the longest job's timeout could not end in it, in an order shuffled
// per batch with the jobs the previous batch cut first, each at a random
// time within its slot. The node keeps a tenth of the budget (at most half
// a second) to send its answer. A job that could not start in time, or
// whose probe the batch's deadline interrupted, is reported not run
// (out_of_time) and the gateway casts an Abstain for it: a timeout cut
// short by the deadline is never reported as a down. A job the node cannot
// build (an invalid request) is reported not run as unsupported. To a
// gateway that predates not_run, such jobs are left out of the answer.
//
// A job's TLS server name, CA bundle (carried by the batch), insecure skip
// verify, extra headers, redirect following and body cap reach the probe
// as they do in the direct source. A job naming a bundle the batch lacks,
// or an unusable one, is checked against the node's own roots; the problem
// is logged.
//
// # Passive windows
//
// A node that proxies and probes keeps, per origin, a window of its
// proxy's latest real requests (passive.go), which it sends to a gateway
// that asks for passive votes. When a publication stops serving an origin
// whose window holds a failure, the window is held rather than dropped:
// kept without the age limit, so that the origin's passive vote keeps
// saying down after a failover that real traffic caused. Every
// -canary-interval the node sends each held origin a canary, a plain GET
// of a path that visitors' GET requests failed on (canary.go); two in a
// row that succeed clear the window. Held windows of
// origins that left the configuration (GET /v1/sites) are forgotten.
//
// The windows may be fed by the edges the node drives instead of (or
// beside) its proxy (Config.PassiveFrom): the server counters of its
// HAProxy (show stat, passive_haproxy.go) and nginx's JSON access logs,
// tailed through rotations (passive_accesslog.go).
package nodeagent
