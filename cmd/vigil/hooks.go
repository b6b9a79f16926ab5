package main

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/publish/dns"
	"github.com/vigilcdn/vigil/core/statuspage"
)

// agentHooks wires the optional parts of the agent around the engine:
// notifications, the DNS publisher and the status page.
type agentHooks struct {
	a   *agent
	cfg *config.Config
	reg prometheus.Registerer

	mu         sync.Mutex
	dispatcher *notify.Dispatcher
	dns        *dns.Server
	dnsCfg     *config.DNSPublisher
	dnsCol     prometheus.Collector
}

func newAgentHooks(a *agent, cfg *config.Config, reg prometheus.Registerer) *agentHooks {
	return &agentHooks{a: a, cfg: cfg, reg: reg}
}

// onCommit wakes the notifiers after a commit that journaled events.
func (h *agentHooks) onCommit() {
	h.mu.Lock()
	d := h.dispatcher
	h.mu.Unlock()
	if d != nil {
		d.Wake()
	}
}

func (h *agentHooks) start(ctx context.Context, eng *engine.Engine) error {
	d, err := notify.New(h.a.store, h.cfg.Notifiers, h.a.log.Named("notify"))
	if err != nil {
		return fmt.Errorf("notifications: %w", err)
	}
	for _, c := range d.Collectors() {
		h.reg.MustRegister(c)
	}
	h.mu.Lock()
	h.dispatcher = d
	h.mu.Unlock()
	h.a.done.Add(1)
	go func() {
		defer h.a.done.Done()
		if err := d.Run(ctx); err != nil && ctx.Err() == nil {
			h.a.log.Error("notifications stopped", "error", err)
		}
	}()
	d.Wake() // deliver what an earlier run left undelivered
	if err := h.startDNS(ctx, eng, h.cfg.DNS); err != nil {
		return err
	}
	h.a.extras = append(h.a.extras, h.stopDNS)
	return nil
}

func (h *agentHooks) startDNS(ctx context.Context, eng *engine.Engine, c *config.DNSPublisher) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c == nil {
		return nil
	}
	srv, err := dns.New(c, eng.Hub(), h.a.log.Named("dns"))
	if err != nil {
		return fmt.Errorf("DNS publisher: %w", err)
	}
	if err := srv.Start(ctx); err != nil {
		return fmt.Errorf("DNS publisher on %s: %w (change publish \"dns\" { listen })", c.Listen, err)
	}
	col := srv.Collector()
	if err := h.reg.Register(col); err != nil {
		h.a.log.Warn("DNS metrics not registered", "error", err)
		col = nil
	}
	h.dns, h.dnsCfg, h.dnsCol = srv, c, col
	h.a.log.Info("DNS publisher started", "listen", srv.Addr(), "zone", c.Zone)
	return nil
}

func (h *agentHooks) stopDNS() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dns != nil {
		_ = h.dns.Close()
		if h.dnsCol != nil {
			h.reg.Unregister(h.dnsCol)
		}
		h.dns, h.dnsCfg, h.dnsCol = nil, nil, nil
	}
}

// reload applies a new configuration to the optional parts.
func (h *agentHooks) reload(ctx context.Context, eng *engine.Engine, cfg *config.Config) {
	h.mu.Lock()
	d := h.dispatcher
	old := h.dnsCfg
	h.mu.Unlock()
	if d != nil {
		if err := d.Reconfigure(cfg.Notifiers); err != nil {
			h.a.log.Error("notifiers not reloaded; the old ones stay", "error", err)
		}
	}
	if !sameDNS(old, cfg.DNS) {
		h.stopDNS()
		if err := h.startDNS(ctx, eng, cfg.DNS); err != nil {
			h.a.log.Error("DNS publisher not restarted", "error", err)
		}
	}
	h.cfg = cfg
}

func sameDNS(a, b *config.DNSPublisher) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.DeclRange = y.DeclRange
	return reflect.DeepEqual(x, y)
}

// extraRoutes serves the status page at / beside the API.
func (h *agentHooks) extraRoutes(mux *http.ServeMux) {
	statuspage.Register(mux, statuspage.Options{})
}
