package agent

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// Build says which build of vigil runs, for vigil_build_info.
type Build struct {
	Version string
	Commit  string
}

// buildInfo is vigil_build_info{version, commit, goversion} 1, the series
// that dashboards join on to show which build each instance runs.
func buildInfo(b Build) prometheus.Collector {
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "vigil_build_info",
		Help:        "1, labelled with the version and commit of the vigil build and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}
