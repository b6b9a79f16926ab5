package main

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
)

// agentHooks wires the optional parts of the agent (notifications, DNS,
// the status page) around the engine.
type agentHooks struct {
	a   *agent
	cfg *config.Config
	reg prometheus.Registerer
}

func newAgentHooks(a *agent, cfg *config.Config, reg prometheus.Registerer) *agentHooks {
	return &agentHooks{a: a, cfg: cfg, reg: reg}
}

func (h *agentHooks) onCommit() {}

func (h *agentHooks) start(ctx context.Context, eng *engine.Engine) error { return nil }

func (h *agentHooks) extraRoutes(mux *http.ServeMux) {}
