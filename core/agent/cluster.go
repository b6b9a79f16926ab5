package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/ha"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/store"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
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
	// tls is the client's TLS (nil without), for explainTLS.
	tls       *tls.Config
	endpoints []string

	mu         sync.Mutex
	cfg        *config.Config
	dispatcher *notify.Dispatcher
	notifyOpts []notify.Option // set by start
	// onLead runs beside the notifications while this instance leads
	// (the dynamic DNS updates); set by start.
	onLead func(ctx context.Context)
}

// newCluster connects to etcd and builds the store and the node around it.
func newCluster(cfg *config.Config, log hclog.Logger, reg prometheus.Registerer) (*cluster, error) {
	ec := cfg.Control.Store
	var err error
	cc := clientv3.Config{Endpoints: ec.Endpoints, DialTimeout: ec.DialTimeout, Logger: zap.NewNop()}
	if ec.UsernameEnv != "" {
		cc.Username, cc.Password = os.Getenv(ec.UsernameEnv), os.Getenv(ec.PasswordEnv)
		if cc.Username == "" || cc.Password == "" {
			return nil, fmt.Errorf("control { store \"etcd\" } names username_env %s and password_env %s, but one is unset or empty; export both", ec.UsernameEnv, ec.PasswordEnv)
		}
	}
	if cc.TLS, err = etcdTLS(ec); err != nil {
		return nil, err
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
	c := &cluster{log: log.Named("cluster"), reg: reg, cli: cli, store: st, cfg: cfg, tls: cc.TLS, endpoints: ec.Endpoints}
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
	// publish "dns_update" as the agent started (a reload does not
	// change it), pushed only while this instance leads.
	dnsUpdate := c.cfg.DNSUpdate
	a.parts.mu.Lock()
	a.parts.dnsUpdateConf = dnsUpdate
	a.parts.mu.Unlock()
	c.mu.Lock()
	c.notifyOpts = a.notifyOptions(eng)
	c.onLead = func(ctx context.Context) { a.parts.runDNSUpdate(ctx, eng, dnsUpdate) }
	c.mu.Unlock()
	c.done = c.node.Start(ctx, eng)
	return nil
}

// lead delivers notifications, and pushes the dynamic DNS updates,
// while this instance leads (the leader in active/standby mode, the
// notifier when sharded: one instance at a time in both).
func (c *cluster) lead(ctx context.Context) {
	c.mu.Lock()
	cfg, opts, onLead := c.cfg, c.notifyOpts, c.onLead
	c.mu.Unlock()
	if onLead != nil {
		var wg sync.WaitGroup
		wg.Go(func() { onLead(ctx) })
		defer wg.Wait() // the term ends with the updater stopped
	}
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

// etcdTLS is the etcd client's TLS: nil without ca_file and cert_file.
func etcdTLS(ec *config.EtcdStore) (*tls.Config, error) {
	if ec.CAFile == "" && ec.CertFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ec.CAFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if _, err := config.LoadCAPool(ec.CAFile); err != nil {
			return nil, fmt.Errorf("control { store \"etcd\" { ca_file } }: %w", err)
		}
		b, err := os.ReadFile(ec.CAFile)
		if err != nil {
			return nil, fmt.Errorf("control { store \"etcd\" { ca_file } }: %w", err)
		}
		pool.AppendCertsFromPEM(b) // checked by LoadCAPool
		tc.RootCAs = pool
	}
	if ec.CertFile != "" {
		cert, err := config.LoadKeyPair(ec.CertFile, ec.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("control { store \"etcd\" { cert_file, key_file } }: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// explainTLS says why etcd could not be reached over TLS, when a direct
// handshake tells: gRPC reports a certificate that etcd refused, or one
// that this instance does not trust, as a deadline. "" when it does not
// tell (or there is no TLS).
func (c *cluster) explainTLS() string {
	if c == nil || c.tls == nil {
		return ""
	}
	for _, ep := range c.endpoints {
		hostport := ep
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			hostport = u.Host
		}
		tc := c.tls.Clone()
		tc.NextProtos = []string{"h2"}
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(hostport)
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", hostport, tc)
		if err != nil {
			var unknown x509.UnknownAuthorityError
			var host x509.HostnameError
			var invalid x509.CertificateInvalidError
			switch {
			case errors.As(err, &unknown):
				return fmt.Sprintf("etcd at %s shows a certificate that ca_file's CA did not sign (%v): set store \"etcd\" { ca_file } to the CA of etcd's --cert-file", ep, err)
			case errors.As(err, &host):
				return fmt.Sprintf("etcd at %s shows a certificate for another name (%v): list the members by a name their certificates carry", ep, err)
			case errors.As(err, &invalid):
				return fmt.Sprintf("etcd at %s shows a certificate that is not valid now (%v): renew etcd's certificate", ep, err)
			case strings.Contains(err.Error(), "remote error: tls:"):
				return fmt.Sprintf("etcd at %s refused this instance's client certificate (%v): set cert_file and key_file to a certificate signed by the CA of etcd's --trusted-ca-file", ep, err)
			}
			continue
		}
		// With TLS 1.3 a refused client certificate comes as an alert
		// after the handshake: read until etcd says something or waits.
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
		if err != nil && strings.Contains(err.Error(), "remote error: tls:") {
			msg := fmt.Sprintf("etcd at %s refused this instance's client certificate (%v): set cert_file and key_file to a certificate signed by the CA of etcd's --trusted-ca-file", ep, err)
			if len(tc.Certificates) == 0 {
				msg = fmt.Sprintf("etcd at %s asks for a client certificate (%v): set store \"etcd\" { cert_file, key_file }", ep, err)
			}
			return msg
		}
	}
	return ""
}
