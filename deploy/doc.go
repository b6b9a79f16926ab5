// Package deploy holds what operators install beside vigil, and its tests:
// the systemd units (systemd/), the default configurations (vigil.hcl,
// vigil-node.env), the Debian package definitions (nfpm/), the container
// recipe (container/), the release builder (dist/, a module of its own,
// run by `make dist`), the Prometheus rules and scrape example
// (prometheus/), the Grafana dashboard (grafana/) and the Alertmanager
// example (alertmanager/). The package has no code: its tests build a
// release for linux/amd64 with dist and check what an operator would get,
// run promtool and amtool on the monitoring files, and check the series
// the rules and the dashboard read against the /metrics pages of a real
// agent and vigil-node, which a real Prometheus then scrapes with the
// example configuration to evaluate the rules, and the Alertmanager
// example's inhibitions on a real Alertmanager.
package deploy
