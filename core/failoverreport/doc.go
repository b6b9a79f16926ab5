// Package failoverreport measures each failover, step by step, from the
// first failed verdict to the nodes' edges: the engine tells a Tracker of
// each failover's decision, commit and publication, the API hands it the
// nodes' acknowledgements (POST /v1/publication/applied), and the Tracker
// builds an api.FailoverReport per failover, observes the
// vigil_failover_detect_seconds, vigil_failover_publish_seconds and
// vigil_failover_edge_seconds histograms, and hands each report, once
// complete (every known node reported, or api.FailoverReportWait after
// the publication), back to the engine to journal as a failover_timed
// event. The arithmetic is here, without I/O: every time comes from the
// caller. docs/failover-time.md describes the report.
package failoverreport
