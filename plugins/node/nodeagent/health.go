package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/plugins/node/proxy"
)

// DefaultDrainTimeout is how long Run waits, when Config does not say, for
// the proxy's requests in flight to end once it is told to stop.
const DefaultDrainTimeout = 10 * time.Second

// NoDrain in Config.DrainTimeout closes the visitors' connections at once.
const NoDrain = -1 * time.Nanosecond

// Build says which build of vigil-node runs, for vigil_node_build_info.
type Build struct {
	Version string
	Commit  string
}

// buildInfo is vigil_node_build_info{version, commit, goversion} 1, the
// series dashboards join on to show which build each node runs.
func buildInfo(b Build) prometheus.Collector {
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "vigil_node_build_info",
		Help:        "1, labelled with the version and commit of the vigil-node build and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// healthz answers 200 "ok" while the process serves: it says nothing about
// the publication or the edges (see readyz).
func (a *Agent) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintln(w, "ok")
}

// readyz answers 200 "ready" when the node can do its jobs, 503 with the
// reasons, one a line, when it cannot: every listener listens, a
// publication is in use when the node follows one, and the last apply of
// every driven edge succeeded.
func (a *Agent) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if why := a.notReady(); len(why) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintln(w, strings.Join(why, "\n"))
		return
	}
	_, _ = fmt.Fprintln(w, "ready")
}

// notReady is why the node is not ready, or nil.
func (a *Agent) notReady() []string {
	var why []string
	if !a.serving.Load() {
		why = append(why, "not serving yet: the listeners are starting")
	}
	if (a.cfg.ControlPlane != "" || a.cfg.StateDir != "") && a.current.Load() == nil {
		why = append(why, "no publication yet: none saved in -state-dir and the control plane has not answered")
	}
	for _, s := range a.EdgeStatus() {
		switch {
		case s.Err != nil:
			why = append(why, fmt.Sprintf("edge %s: the last apply failed: %v", s.Edge, s.Err))
		case s.Applied == 0 && a.current.Load() != nil:
			why = append(why, fmt.Sprintf("edge %s: the publication is not applied yet", s.Edge))
		}
	}
	return why
}

// drain stops the proxy's server: no new visitor is accepted, and the
// requests in flight get up to Config.DrainTimeout to end before their
// connections are closed.
func (a *Agent) drain(srv *proxy.Server) {
	a.serving.Store(false)
	timeout := max(a.cfg.DrainTimeout, 0)
	a.log.Info("draining visitor connections", "timeout", timeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
		a.log.Warn("requests still in flight at the end of -drain-timeout: their connections are closed", "timeout", timeout.String())
	} else if err != nil {
		a.log.Warn("draining visitor connections", "error", err)
	} else {
		a.log.Info("visitor connections drained", "took", time.Since(start).Round(time.Millisecond).String())
	}
	_ = srv.Close()
}
