// Package agent is vigil-node, the agent on each of the operator's edge
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
//     control plane is away, across its own restarts too.
//   - With -proxy-listen it serves visitor traffic through package proxy,
//     for every published site, picked by Host header.
//
// -metrics-listen serves Prometheus metrics: the proxy's, plus
// vigil_node_gateway_attached, vigil_node_probe_jobs_total{result} and
// vigil_node_publication_version / vigil_node_publication_errors_total.
package agent
