package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/publish/dns"
	"github.com/vigilcdn/vigil/core/statuspage"
)

// parts are the optional parts around the engine: notifications, the DNS
// publisher and the status page.
type parts struct {
	a   *Agent
	cfg *config.Config

	mu           sync.Mutex
	dispatcher   *notify.Dispatcher
	dns          *dns.Server
	dnsCfg       *config.DNSPublisher
	dnsCollector prometheus.Collector
	dnsUpdate    *dns.Updater
	dnsUpdateCol prometheus.Collector
	// dnsUpdateConf is the publish "dns_update" block the agent started
	// with (a reload does not change it).
	dnsUpdateConf *config.DNSUpdatePublisher
}

// Committed makes parts an engine.Observer: it wakes the notifiers (this
// instance's, or the cluster leader's) after a commit that journaled
// events.
func (p *parts) Committed(c engine.Commit) {
	if len(c.Events) == 0 {
		return
	}
	p.mu.Lock()
	d := p.dispatcher
	p.mu.Unlock()
	if d != nil {
		d.Wake()
	}
	p.a.cluster.wake()
}

// start runs the notifiers (the cluster runs them itself while it leads)
// and the DNS publisher.
func (p *parts) start(ctx context.Context, eng *engine.Engine) error {
	d, err := notify.New(p.a.store, p.cfg.Notifiers, p.a.log.Named("notify"), p.a.notifyOptions(eng)...)
	if err != nil {
		return fmt.Errorf("notifications: %w", err)
	}
	for _, c := range d.Collectors() {
		p.a.reg.MustRegister(c)
	}
	p.mu.Lock()
	p.dispatcher = d
	p.mu.Unlock()
	p.a.done.Add(1)
	go func() {
		defer p.a.done.Done()
		if err := d.Run(ctx); err != nil && ctx.Err() == nil {
			p.a.log.Error("notifications stopped", "error", err)
		}
	}()
	d.Wake() // deliver what an earlier run left undelivered
	p.mu.Lock()
	p.dnsUpdateConf = p.cfg.DNSUpdate
	p.mu.Unlock()
	if err := p.startDNSUpdate(ctx, eng, p.cfg.DNSUpdate); err != nil {
		return err
	}
	return p.startDNS(ctx, eng, p.cfg.DNS)
}

// startDNSUpdate starts the dynamic updates of publish "dns_update" on a
// single instance (in a cluster, runDNSUpdate runs them while this
// instance leads). A reload does not change it; a restart does.
func (p *parts) startDNSUpdate(ctx context.Context, eng *engine.Engine, c *config.DNSUpdatePublisher) error {
	if c == nil {
		return nil
	}
	_, err := p.openDNSUpdate(ctx, eng, c)
	return err
}

// openDNSUpdate starts an updater for c and makes it the one the API
// shows.
func (p *parts) openDNSUpdate(ctx context.Context, eng *engine.Engine, c *config.DNSUpdatePublisher) (*dns.Updater, error) {
	u, err := dns.NewUpdater(c, eng.Hub(), p.a.log)
	if err != nil {
		return nil, fmt.Errorf("DNS update publisher: %w", err)
	}
	col := u.Collector()
	if err := p.a.reg.Register(col); err != nil {
		p.a.log.Warn("DNS update metrics not registered", "error", err)
		col = nil
	}
	u.Start(ctx)
	p.mu.Lock()
	p.dnsUpdate, p.dnsUpdateCol = u, col
	p.mu.Unlock()
	p.a.log.Info("DNS update publisher started", "server", c.Server, "zone", c.Zone)
	return u, nil
}

// runDNSUpdate pushes the dynamic updates of c while ctx lasts: a
// cluster's leader runs it for its term, so that one instance writes
// each name. A new leader's updater reads the records the primary serves
// before its first update of each name, and goes on from there.
func (p *parts) runDNSUpdate(ctx context.Context, eng *engine.Engine, c *config.DNSUpdatePublisher) {
	if c == nil {
		return
	}
	u, err := p.openDNSUpdate(ctx, eng, c)
	if err != nil {
		p.a.log.Error("DNS update publisher not started", "error", err)
		return
	}
	<-ctx.Done()
	u.Close()
	p.mu.Lock()
	if p.dnsUpdate == u {
		if p.dnsUpdateCol != nil {
			p.a.reg.Unregister(p.dnsUpdateCol)
		}
		p.dnsUpdate, p.dnsUpdateCol = nil, nil
	}
	p.mu.Unlock()
	p.a.log.Info("DNS update publisher stopped: this instance no longer leads")
}

// DNSUpdate makes parts the API's readmodel.DNSUpdates: the state of the
// site's name in the running updater; standby when publish "dns_update"
// is configured but another instance of the cluster pushes.
func (p *parts) DNSUpdate(_, hostname string) *api.DNSUpdateView {
	p.mu.Lock()
	u, c := p.dnsUpdate, p.dnsUpdateConf
	p.mu.Unlock()
	if u != nil {
		return u.View(hostname)
	}
	if c == nil {
		return nil
	}
	name, ok := dns.UpdatedName(c.Zone, hostname)
	if !ok {
		return nil
	}
	return &api.DNSUpdateView{Name: name, State: api.DNSUpdateStandby}
}

func (p *parts) startDNS(ctx context.Context, eng *engine.Engine, c *config.DNSPublisher) error {
	if c == nil {
		return nil
	}
	srv, err := openDNS(ctx, eng, c, p.a.log.Named("dns"))
	if err != nil {
		return err
	}
	p.installDNS(srv, c)
	return nil
}

// openDNS starts a DNS publisher for c, without installing it.
func openDNS(ctx context.Context, eng *engine.Engine, c *config.DNSPublisher, log hclog.Logger) (*dns.Server, error) {
	srv, err := dns.New(c, eng.Hub(), log)
	if err != nil {
		return nil, fmt.Errorf("DNS publisher: %w", err)
	}
	if err := srv.Start(ctx); err != nil {
		return nil, fmt.Errorf("DNS publisher on %s: %w (change publish \"dns\" { listen })", c.Listen, err)
	}
	return srv, nil
}

// installDNS makes srv the DNS publisher: the one it replaces closes, and
// the metrics follow the new one.
func (p *parts) installDNS(srv *dns.Server, c *config.DNSPublisher) {
	p.stopDNS()
	p.mu.Lock()
	defer p.mu.Unlock()
	col := srv.Collector()
	if err := p.a.reg.Register(col); err != nil {
		p.a.log.Warn("DNS metrics not registered", "error", err)
	} else {
		p.dnsCollector = col
	}
	p.dns, p.dnsCfg = srv, c
	p.a.log.Info("DNS publisher started", "listen", srv.Addr(), "zone", c.Zone)
}

// reloadDNS replaces the DNS publisher with one for c (none when c is
// nil). DNS keeps being served when the new one cannot start: on a new
// port the new server binds before the old one closes; on the same port
// (whatever the host part: 127.0.0.1:53 and 0.0.0.0:53 overlap) the old one
// must let go first, and comes back when the new one fails.
func (p *parts) reloadDNS(ctx context.Context, eng *engine.Engine, c *config.DNSPublisher) error {
	p.mu.Lock()
	oldCfg := p.dnsCfg
	p.mu.Unlock()
	if c == nil {
		p.stopDNS()
		return nil
	}
	if oldCfg == nil || !samePort(oldCfg.Listen, c.Listen) {
		srv, err := openDNS(ctx, eng, c, p.a.log.Named("dns"))
		if err != nil {
			if oldCfg != nil {
				return fmt.Errorf("%w; the old publisher on %s goes on serving", err, oldCfg.Listen)
			}
			return err
		}
		p.installDNS(srv, c)
		return nil
	}
	p.stopDNS()
	srv, err := openDNS(ctx, eng, c, p.a.log.Named("dns"))
	if err == nil {
		p.installDNS(srv, c)
		return nil
	}
	back, berr := openDNS(ctx, eng, oldCfg, p.a.log.Named("dns"))
	if berr != nil {
		return fmt.Errorf("%w; the old publisher could not come back either, so no DNS is served until a reload succeeds: %v", err, berr)
	}
	p.installDNS(back, oldCfg)
	return fmt.Errorf("%w; the old publisher serves again", err)
}

// samePort reports whether two listen addresses name one port, so that
// one cannot be bound while the other is held.
func samePort(a, b string) bool {
	_, pa, errA := net.SplitHostPort(a)
	_, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return pa == pb
}

func (p *parts) stopDNS() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dns != nil {
		_ = p.dns.Close()
		if p.dnsCollector != nil {
			p.a.reg.Unregister(p.dnsCollector)
		}
		p.dns, p.dnsCfg, p.dnsCollector = nil, nil, nil
	}
}

func (p *parts) stop() {
	p.stopDNS()
	p.mu.Lock()
	u := p.dnsUpdate
	p.mu.Unlock()
	if u != nil {
		u.Close()
	}
}

// reload applies a new configuration to the notifiers and the DNS
// publisher and says what changed, or what could not be applied.
func (p *parts) reload(ctx context.Context, eng *engine.Engine, cfg *config.Config) (applied []string, failed []error) {
	p.mu.Lock()
	d := p.dispatcher
	old := p.dnsCfg
	oldCfg := p.cfg
	p.mu.Unlock()
	if !reflect.DeepEqual(notifiersOf(oldCfg), notifiersOf(cfg)) {
		var err error
		if d != nil {
			err = d.Reconfigure(cfg.Notifiers)
		} else {
			err = p.a.cluster.reload(cfg) // the cluster runs them while it leads
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("notifiers not reloaded, the old ones stay: %w", err))
		} else {
			applied = append(applied, "notifiers")
		}
	}
	if !sameDNS(old, cfg.DNS) {
		if err := p.reloadDNS(ctx, eng, cfg.DNS); err != nil {
			failed = append(failed, fmt.Errorf("DNS publisher not restarted: %w", err))
		} else {
			applied = append(applied, "publish \"dns\"")
		}
	}
	if oldCfg != nil && !sameDNSUpdate(oldCfg.DNSUpdate, cfg.DNSUpdate) {
		failed = append(failed, fmt.Errorf("publish \"dns_update\" changed, and a reload does not apply it: restart the agent"))
	}
	p.mu.Lock()
	p.cfg = cfg
	p.mu.Unlock()
	return applied, failed
}

// sameDNSUpdate reports whether two publish "dns_update" blocks say the
// same, wherever they are written.
func sameDNSUpdate(a, b *config.DNSUpdatePublisher) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.DeclRange = y.DeclRange
	return x == y
}

// notifiersOf is what matters of the notifiers for a reload.
func notifiersOf(cfg *config.Config) []config.Notifier {
	out := make([]config.Notifier, len(cfg.Notifiers))
	for i, n := range cfg.Notifiers {
		out[i] = *n
		out[i].DeclRange = config.Notifier{}.DeclRange
	}
	return out
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
func (p *parts) extraRoutes(mux *http.ServeMux) {
	statuspage.Register(mux, statuspage.Options{})
}
