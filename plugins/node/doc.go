// Package node is vigil-source-node, the gateway that the operator's own
// edge nodes attach to, as a vote source: in each round it has up to
// nodes_per_round online nodes probe each origin and casts one vote per
// answering node, with the node id as the voter.
//
// Nodes run vigil-node (package agent). Each keeps one gRPC stream open to
// the gateway (service NodeGateway, internal/proto/nodegateway/v1): it says
// hello with its id and labels, sends a heartbeat every third of
// online_timeout, and answers each batch of probe jobs the gateway pushes
// with one batch of results. A node is online while it has been heard from
// within online_timeout; a node whose stream breaks is offline at once.
// An offline node gets no work but stays listed as offline, with its
// last-seen time and why, until it has been offline for forget_after (at
// most MaxOfflineNodes are kept, the oldest forgotten first). A node that
// comes back with the same id is online again, as one entry.
//
// Configuration (the source's `config { }` block):
//
//	config {
//	  listen          = "0.0.0.0:8471"      # required: where nodes attach
//	  token_env       = "VIGIL_NODE_TOKEN"  # shared token, from this env var (list it in env = [...])
//	  tls_cert_file   = "gateway.pem"       # optional TLS for the node link ...
//	  tls_key_file    = "gateway-key.pem"
//	  client_ca_file  = "nodes-ca.pem"      # ... and mTLS: node certs must name the node id (CN or DNS SAN)
//	  nodes_per_round = 3                   # nodes asked per origin and round
//	  online_timeout  = "15s"               # no heartbeat for this long = offline
//	  forget_after    = "24h"               # offline this long = forgotten (> online_timeout)
//	  site_labels     = ["www: region=eu"]  # only nodes with all these labels probe site www
//	  status_listen   = "127.0.0.1:8472"    # optional: GET /v1/nodes lists the nodes as JSON
//	}
//
// At least one of token_env and client_ca_file is required. Without
// tls_cert_file the link is plain gRPC and the token crosses the network in
// clear: use TLS outside a trusted network.
//
// # Choosing nodes
//
// For each origin the eligible nodes are the online nodes carrying every
// label of the site's site_labels entry (all online nodes if it has none),
// sorted by id. The gateway takes nodes_per_round consecutive nodes starting
// at an offset that is a hash of (site, origin) plus round*nodes_per_round:
// the window moves every round, so each of n eligible nodes is asked at
// least once every ceil(n/nodes_per_round) rounds, and the origins of one
// round spread over different nodes. Each chosen node gets all its jobs of
// the round in one batch.
//
// # Votes and deadlines
//
// vigil budgets a round down the chain: the call's deadline is the source's
// share of round_interval, and every target's timeout fits well inside it.
// The gateway keeps a little of that time to deliver the votes (a tenth of
// the time left, at most a second) and sends each node the rest, up to its
// soft deadline, as the batch's budget. A node runs every job of its batch
// at once (up to its -concurrency and open-file limit), starts spread with
// jitter over a part of the budget, and answers a little before the budget
// ends; see package agent.
//
// Every chosen node casts one vote per job sent to it, with its node id as
// voter: its verdict (Up or Down), or an Abstain when it gave none:
//
//   - out_of_time: the node reported the job not run (the batch's time ran
//     out before the probe could start or end: a probe the deadline cut
//     short is no Down), left it out of its answer, or did not answer by
//     the gateway's deadline;
//   - no_voter: the node went offline before answering, or was not reading
//     its stream when the batch was sent;
//   - unsupported: the node's agent predates the target's TLS, header,
//     redirect or body settings (it does not announce "probe_settings"), so
//     the job is not sent to it; or the node could not build the probe.
//
// A target that no node can look at (none online, or none carrying the
// site's labels) gets one Abstain no_voter from GatewayVoter
// ("node-gateway"). Abstentions are never tallied: the origin passes on to
// the next source, and vigil shows who abstained and why. A 1-1 split of
// two answering nodes is returned as two votes: under min_votes = 2 it has
// no majority, and the engine passes the origin on to the next source.
//
// The protocol is additive (new fields under new numbers, the same
// protocol_version), so nodes and the gateway can be upgraded in any order:
// an older node gets the plain jobs and abstains (unsupported) on the
// others, and a newer node leaves the jobs it did not run out of its answer
// to an older gateway.
//
// # The passive trigger
//
// With passive_votes (and passive_trigger, on by default with it), a node
// that proxies sends the gateway, between rounds, the passive window of an
// origin as soon as it gains failures and trips the rule the welcome
// carries (passive_min_requests, passive_failure_ratio). The gateway maps
// the origin's address to its sites by the ballots it got, judges the
// window by the passive vote rule and, when it votes down, reports the
// sites the node is eligible for as suspects (Source.Suspects, the SDK's
// SuspectReporter): vigil then confirms them early. An origin found down,
// and a site reported, are not reported again within suspect_interval.
//
// # Who is online
//
// Attach and detach are logged ("node online" / "node offline", with the
// number online), as are forgotten nodes ("node forgotten after 24h
// offline") and every round in which a chosen node gave no answer.
// Source.Nodes lists the attached nodes and the offline ones not forgotten
// yet; Status reports them to vigil (GET /v1/nodes, `vigil status`), and
// status_listen serves the same list at its own GET /v1/nodes, online nodes
// under "nodes", offline ones under "offline".
package node
