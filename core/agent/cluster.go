package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/ha"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/store"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcd"
)

// cluster is the agent's part in a cluster over etcd (control { store
// "etcd" { } }): the etcd client and store, the node (election, fence,
// ownership), and notifications delivered only while this instance leads.
type cluster struct {
	log   hclog.Logger
	reg   prometheus.Registerer
	cli   *clientv3.Client
	store *etcdstore.Store
	node  *ha.Node
	done  <-chan struct{}

	mu         sync.Mutex
	cfg        *config.Config
	dispatcher *notify.Dispatcher
	notifyOpts []notify.Option // set by start
}

// newCluster connects to etcd and builds the store and the node around it.
func newCluster(cfg *config.Config, log hclog.Logger, reg prometheus.Registerer) (*cluster, error) {
	ec := cfg.Control.Store
	cc := clientv3.Config{Endpoints: ec.Endpoints, DialTimeout: ec.DialTimeout, Logger: zap.NewNop()}
	if ec.UsernameEnv != "" {
		cc.Username, cc.Password = os.Getenv(ec.UsernameEnv), os.Getenv(ec.PasswordEnv)
		if cc.Username == "" || cc.Password == "" {
			return nil, fmt.Errorf("control { store \"etcd\" } names username_env %s and password_env %s, but one is unset or empty; export both", ec.UsernameEnv, ec.PasswordEnv)
		}
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", ec.Endpoints, err)
	}
	id, url := ec.ID, ec.Advertise
	if id == "" || url == "" {
		host, _ := os.Hostname()
		_, port, _ := net.SplitHostPort(cfg.Control.API.Listen)
		if id == "" {
			id = host + "-" + port
		}
		if url == "" {
			url = "http://" + cfg.Control.API.Listen
			if cfg.Control.API.TLS != nil {
				url = "https://" + cfg.Control.API.Listen
			}
		}
	}
	st := etcdstore.New(cli, etcdstore.Options{Prefix: ec.Prefix, JournalSize: store.DefaultJournalSize, MaxTxnOps: ec.MaxTxnOps, Timeout: ec.LeaseTTL})
	c := &cluster{log: log.Named("cluster"), reg: reg, cli: cli, store: st, cfg: cfg}
	c.node = ha.New(ha.Options{Client: cli, Store: st, Config: ec, ID: id, URL: url, Logger: c.log, OnLead: c.lead, OnStoreChange: c.wake})
	reg.MustRegister(c.node.Collectors()...)
	log.Info("state in etcd", "endpoints", ec.Endpoints, "prefix", ec.Prefix, "mode", ec.Mode, "id", id, "url", url)
	return c, nil
}

// engineOptions plugs the node into the engine.
func (c *cluster) engineOptions(o *engine.Options) {
	if c == nil {
		return
	}
	o.Active, o.Owns, o.OnCommitError = c.node.Active, c.node.Owns(), c.node.OnCommitError
}

// wake wakes the notifiers, if this instance delivers them.
func (c *cluster) wake() {
	if c == nil {
		return
	}
	c.mu.Lock()
	d := c.dispatcher
	c.mu.Unlock()
	if d != nil {
		d.Wake()
	}
}

// start runs the node, and the DNS publisher on every instance (it
// follows this instance's publication, which standbys mirror).
func (c *cluster) start(ctx context.Context, a *Agent, eng *engine.Engine) error {
	if err := a.parts.startDNS(ctx, eng, c.cfg.DNS); err != nil {
		return err
	}
	c.mu.Lock()
	c.notifyOpts = a.notifyOptions(eng)
	c.mu.Unlock()
	c.done = c.node.Start(ctx, eng)
	return nil
}

// lead delivers notifications while this instance leads.
func (c *cluster) lead(ctx context.Context) {
	c.mu.Lock()
	cfg, opts := c.cfg, c.notifyOpts
	c.mu.Unlock()
	d, err := notify.New(c.store, cfg.Notifiers, c.log.Named("notify"), opts...)
	if err != nil {
		c.log.Error("notifications not started", "error", err)
		return
	}
	var cols []prometheus.Collector
	for _, col := range d.Collectors() {
		if c.reg.Register(col) == nil {
			cols = append(cols, col)
		}
	}
	c.mu.Lock()
	c.dispatcher = d
	c.mu.Unlock()
	c.log.Info("delivering notifications while leader", "notifiers", len(cfg.Notifiers))
	go d.Wake()
	if err := d.Run(ctx); err != nil && ctx.Err() == nil {
		c.log.Error("notifications stopped", "error", err)
	}
	c.mu.Lock()
	c.dispatcher = nil
	c.mu.Unlock()
	for _, col := range cols {
		c.reg.Unregister(col)
	}
}

// wrap adds GET /v1/cluster and the standby's answer to changes.
func (c *cluster) wrap(h http.Handler) http.Handler {
	if c == nil {
		return h
	}
	return c.node.Handler(h)
}

// setConfig keeps cfg for the terms this instance leads next.
func (c *cluster) setConfig(cfg *config.Config) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.cfg = cfg
	c.mu.Unlock()
}

// reload keeps cfg and applies its notifiers to the running dispatcher,
// if this instance leads.
func (c *cluster) reload(cfg *config.Config) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	c.cfg = cfg
	d := c.dispatcher
	c.mu.Unlock()
	if d != nil {
		return d.Reconfigure(cfg.Notifiers)
	}
	return nil // they start from cfg when this instance next leads
}

// close waits for the node to give up its roles (after the agent's
// context ended), then closes the etcd client.
func (c *cluster) close() {
	if c == nil {
		return
	}
	if c.done != nil {
		<-c.done
	}
	c.cli.Close()
}
