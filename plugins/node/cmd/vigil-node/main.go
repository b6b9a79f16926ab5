// Command vigil-node is the agent on each edge node: it probes origins for
// the vigil-source-node gateway, follows the control plane's publication
// (kept in -state-dir across restarts and control plane outages) and, with
// -proxy-listen, serves visitor traffic as a reverse proxy to the current
// level's origins.
//
//	vigil-node -id edge-par-1 -labels region=eu -gateway 10.0.0.5:8471 -token-env VIGIL_NODE_TOKEN \
//	    -control-plane http://10.0.0.5:8470 -state-dir /var/lib/vigil-node -proxy-listen :80 -metrics-listen :9471
//
// With a cluster of agents, -control-plane and -gateway list them all,
// in the same order; the node follows the leader's publication and
// attaches to every gateway (docs/ha.md, "Nodes, TLS and tokens"):
//
//	vigil-node -id edge-par-1 -gateway 10.0.0.5:8471,10.0.0.6:8471 -token-env VIGIL_NODE_TOKEN \
//	    -control-plane https://10.0.0.5:8470,https://10.0.0.6:8470 -control-plane-ca /etc/vigil-node/api-ca.pem \
//	    -control-plane-token-env VIGIL_NODE_API_TOKEN -state-dir /var/lib/vigil-node -proxy-listen :80
//
// SIGHUP re-reads the TLS, CA and template files and never ends the process; SIGTERM
// and SIGINT drain the proxy's visitors within -drain-timeout and exit 0
// (plugins/node/README.md, "Running it as a daemon").
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/internal/labels"
	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/plugins/node/xds"
)

func main() {
	if isVersionArgs(os.Args[1:]) {
		fmt.Println(versionLine())
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "vigil-node:", err)
		os.Exit(2)
	}
}

// newAgent is agent.New (a test stops run there to see the config).
var newAgent = nodeagent.New

func run(args []string) error {
	fs := flag.NewFlagSet("vigil-node", flag.ContinueOnError)
	var (
		gateway      = fs.String("gateway", "", "vigil-source-node address `host:port`, or a cluster's gateways separated by commas (the node attaches to each); empty: do not probe")
		id           = fs.String("id", "", "node id, its voter id in vigil (letters, digits, ._:-@/)")
		labelSpec    = fs.String("labels", "", "node labels `k=v,k=v`, matched by the gateway's site_labels")
		tokenEnv     = fs.String("token-env", "", "`NAME` of the environment variable holding the gateway token")
		tlsCA        = fs.String("tls-ca", "", "PEM `file` of the CA that signed the gateway's certificate (turns TLS on)")
		tlsCert      = fs.String("tls-cert", "", "PEM client certificate `file` for mTLS (CN or DNS name = the node id)")
		tlsKey       = fs.String("tls-key", "", "PEM private key `file` of -tls-cert")
		tlsName      = fs.String("tls-server-name", "", "name to verify the gateway's certificate against (default: the -gateway host)")
		originCA     = fs.String("origin-ca", "", "PEM `file` of the CA(s) that signed your https origins' certificates, trusted besides the system's roots by the proxy, and by the probes of sites whose health_check names no ca_file")
		controlPlane = fs.String("control-plane", "", "vigil API base `URL` to follow the publication from, e.g. http://10.0.0.5:8470, or a cluster's agents separated by commas (the node follows the one that leads)")
		cpCA         = fs.String("control-plane-ca", "", "PEM `file` of the CA that signed the control plane's https certificate, trusted besides the system's roots")
		cpCert       = fs.String("control-plane-cert", "", "PEM client certificate `file` for a control plane API with client_ca_file")
		cpKey        = fs.String("control-plane-key", "", "PEM private key `file` of -control-plane-cert")
		cpTokenEnv   = fs.String("control-plane-token-env", "", "`NAME` of the environment variable holding the API token, if the API needs one")
		stateDir     = fs.String("state-dir", "", "`directory` keeping the last publication across restarts and control plane outages")
		proxyListen  = fs.String("proxy-listen", "", "serve visitor traffic on `host:port` as a reverse proxy")
		metrics      = fs.String("metrics-listen", "", "serve Prometheus /metrics on `host:port`")
		concurrency  = fs.Int("concurrency", nodeagent.DefaultConcurrency, "the most probes in flight at once, over every batch (lowered to what the open-file limit allows)")
		spread       = fs.Float64("spread", nodeagent.DefaultSpread, "part of a batch's time over which probe starts are spread, 0 (all at once) to 0.5")
		failCount    = fs.Int("fail-count", proxy.DefaultFailCount, "proxy: failures within -fail-window that skip an origin")
		failWindow   = fs.Duration("fail-window", proxy.DefaultFailWindow, "proxy: window for -fail-count")
		skipFor      = fs.Duration("skip-for", proxy.DefaultSkipFor, "proxy: how long a failing origin is skipped")
		retries      = fs.Int("retries", proxy.DefaultRetries, "proxy: retries of a failed idempotent request on another origin (0: none)")
		retryBudget  = fs.Duration("retry-budget", proxy.DefaultRetryBudget, "proxy: no retry starts this long after the request arrived")
		replayMax    = fs.Int64("retry-body-max", proxy.DefaultMaxReplayBody, "proxy: largest request body (bytes) buffered so it can be retried")
		connTimeout  = fs.Duration("connect-timeout", proxy.DefaultConnectTimeout, "proxy: timeout connecting to an origin")
		respTimeout  = fs.Duration("response-timeout", proxy.DefaultResponseTimeout, "proxy: timeout waiting for an origin's response headers")
		passWindow   = fs.Int("passive-window", nodeagent.DefaultPassiveWindow, "passive votes: the latest `N` requests to an origin its window holds")
		passAge      = fs.Duration("passive-window-age", nodeagent.DefaultPassiveAge, "passive votes: requests older than this leave the window (whichever of N and age comes first)")
		passIgnore   = fs.String("passive-ignore", nodeagent.DefaultPassiveIgnore, "passive votes: `statuses` that are backpressure, not failures (429, 503-retry-after: a 503 with Retry-After; none)")
		passSlow     = fs.Duration("passive-slow", 0, "passive votes: an answer slower than this is a soft failure (0: off)")
		passFrom     = fs.String("passive-from", "", "passive votes: what feeds the windows, comma-separated: `proxy` (this node's -proxy-listen), haproxy (the counters of -haproxy-socket's HAProxy), nginx-log:PATH (nginx's JSON access log, log_format vigil of builtin:nginx), access-log:PATH (the same lines from another edge, e.g. varnishncsa), or none (default: proxy when proxying, haproxy when driving one)")
		passEvery    = fs.Duration("passive-interval", nodeagent.DefaultPassiveInterval, "passive votes: how often HAProxy's counters and the nginx access log are read into the windows")
		canaryEvery  = fs.Duration("canary-interval", nodeagent.DefaultCanaryInterval, "passive votes: time between two canary requests to an origin no longer served whose real traffic failed (0: none; its window then votes down until it is served again)")
		haSocket     = fs.String("haproxy-socket", "", "drive a local HAProxy live through its Runtime API: its stats socket, a unix socket `path` or host:port, at level admin")
		haSrvArgs    = fs.String("haproxy-server-args", edge.DefaultHAProxyServerArgs, "HAProxy: `arguments` of every server vigil-node adds (haproxy.cfg's default-server does not apply to them); the default's checks let HAProxy use the next level's backup servers when the current level fails")
		haWatch      = fs.Duration("haproxy-watch", edge.DefaultHAProxyWatch, "HAProxy: how often to ask HAProxy (show info) whether it was reloaded or restarted, which drops the servers vigil-node added: a new process gets the publication at once (0: at the next -edge-resync)")
		haTLSArgs    = fs.String("haproxy-tls-args", edge.DefaultHAProxyTLSArgs, "HAProxy: `arguments` added for https origins ({sni}: the site's hostname)")
		haFallback   = fs.String("haproxy-fallback", "", "HAProxy: `SRC:DEST` template of the whole haproxy.cfg (SRC a file or builtin:haproxy), written at every publication and reloaded when the runtime API cannot apply one")
		haFbCheck    = fs.String("haproxy-fallback-check", "haproxy -c -q -f "+edge.CandidatePlaceholder, "HAProxy: `command` checking the fallback configuration")
		haFbReload   = fs.String("haproxy-fallback-reload", "", "HAProxy: `command` reloading HAProxy gracefully with the fallback configuration, e.g. \"systemctl reload haproxy\"")
		haRemove     = fs.Duration("haproxy-remove-after", edge.DefaultHAProxyRemoveAfter, "HAProxy: how long a server vigil-node added stays in maintenance once its origin left every level (or its site the publication) before it is deleted with del server, when drained (0: at the first apply)")
		haDrain      = fs.Duration("haproxy-drain-timeout", 0, "HAProxy: cut the sessions still running on a server vigil-node is removing (see -haproxy-remove-after) this long after it went to maintenance (shutdown sessions server), so that it can be deleted; never before -haproxy-remove-after (0: never cut, the deletion waits for them)")
		tmplCheck    = fs.String("template-check", "", "`command` (sh) checking the rendered -template files; a failure keeps the old ones ("+edge.CandidatePlaceholder+": the path of a single rendered file before it replaces the old one)")
		tmplReload   = fs.String("template-reload", "", "`command` (sh) reloading the edge after the -template files changed and passed -template-check")
		reloadMin    = fs.Duration("reload-min-interval", edge.DefaultMinReloadInterval, "least time between two reloads of an edge")
		xdsListen    = fs.String("xds-listen", "", "serve the publication over xDS (CDS, EDS, RDS, LDS) to a local Envoy or gRPC xDS clients on `host:port`, e.g. 127.0.0.1:18000 (plain text, no authentication)")
		xdsHTTP      = fs.String("xds-http-listen", xds.DefaultHTTPListen, "xDS: `address` (IP:port) of the HTTP listener served to an Envoy that takes its listeners by LDS")
		xdsCA        = fs.String("xds-trusted-ca", xds.DefaultTrustedCA, "xDS: CA bundle `file`, on Envoy's machine, that Envoy checks https origins against")
		edgePrefix   = fs.String("edge-backend-prefix", "", "`prefix` of every backend (HAProxy) and upstream (templates) name; the rest is the site's name")
		edgeResync   = fs.Duration("edge-resync", edge.DefaultResync, "re-apply the publication to the edges this often, to undo a restart or a hand edit")
		logLevel     = fs.String("log-level", "info", "log level: debug, info, warn, error")
		logJSON      = fs.Bool("log-json", false, "log JSON lines")
		drainTimeout = fs.Duration("drain-timeout", nodeagent.DefaultDrainTimeout, "on SIGTERM or SIGINT: how long the requests in flight on -proxy-listen get to end before their connections are closed (0: closed at once)")
	)
	var templates, tmplVars multiFlag
	// The live Varnish driver (edge.VarnishAdmin).
	var (
		varnishAdmin  = fs.String("varnish-admin", "", "drive a running varnishd live through its management port: its -T `host:port`; levels switch with backend.set_health, a VCL is loaded only when the origins change")
		varnishSecret = fs.String("varnish-secret", "", "Varnish: the secret `file` varnishd's -S names (Debian: /etc/varnish/secret)")
		varnishProbe  = fs.String("varnish-probe-url", "", "Varnish: the `URL` each backend's probe fetches (default /; off for no probes)")
	)
	fs.Var(&templates, "template", "render `SRC:DEST` at every publication (SRC a Go text/template file, or builtin:NAME: nginx, haproxy, varnish, caddy, trafficserver-parent, trafficserver-remap); repeatable, one -template-check and -template-reload for all")
	fs.Var(&tmplVars, "template-var", "`k=v` handed to templates as .Vars (builtin:nginx: listen, default_server, access_log; builtin:haproxy: listen, stats_socket, pidfile); repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every setting is a flag (see -h)", fs.Args())
	}
	set, err := labels.Parse(*labelSpec)
	if err != nil {
		return fmt.Errorf("-labels: %w", err)
	}
	if hclog.LevelFromString(*logLevel) == hclog.NoLevel {
		return fmt.Errorf("-log-level %q: give one of trace, debug, info, warn, error", *logLevel)
	}
	log := newLogger(*logLevel, *logJSON, os.Stderr)
	cfg := nodeagent.Config{
		Gateway: *gateway, ID: *id, Labels: set, ControlPlane: *controlPlane, StateDir: *stateDir,
		ProxyListen: *proxyListen, MetricsListen: *metrics, Concurrency: *concurrency,
		Proxy: proxy.Options{FailCount: *failCount, FailWindow: *failWindow, SkipFor: *skipFor, Retries: *retries,
			RetryBudget: *retryBudget, MaxReplayBody: *replayMax, ConnectTimeout: *connTimeout, ResponseTimeout: *respTimeout},
		Log: log, Build: nodeagent.Build{Version: version, Commit: buildCommit()},
	}
	switch {
	case *drainTimeout < 0:
		return fmt.Errorf("-drain-timeout %v: use a positive duration such as 10s, or 0 to close visitors' connections at once", *drainTimeout)
	case *drainTimeout == 0:
		cfg.DrainTimeout = nodeagent.NoDrain
	default:
		cfg.DrainTimeout = *drainTimeout
	}
	edges, err := edgeDrivers(edgeFlags{haSocket: *haSocket, haSrvArgs: *haSrvArgs, haTLSArgs: *haTLSArgs, haFallback: *haFallback,
		haFbCheck: *haFbCheck, haFbReload: *haFbReload, templates: templates, check: *tmplCheck, reload: *tmplReload, minInterval: *reloadMin,
		haRemoveAfter: *haRemove, haDrainTimeout: *haDrain, haWatch: *haWatch, xdsListen: *xdsListen, xdsHTTP: *xdsHTTP, xdsCA: *xdsCA,
		varnishAdmin: *varnishAdmin, varnishSecret: *varnishSecret, varnishProbe: *varnishProbe, log: log})
	if err != nil {
		return err
	}
	cfg.Edges = edges
	cfg.Edge.Prefix, cfg.Edge.Resync = *edgePrefix, *edgeResync
	if len(tmplVars) > 0 {
		cfg.Edge.Vars = map[string]string{}
		for _, kv := range tmplVars {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("-template-var %q: write k=v", kv)
			}
			cfg.Edge.Vars[k] = v
		}
	}
	if cfg.Passive.Ignore, err = nodeagent.ParsePassiveIgnore(*passIgnore); err != nil {
		return err
	}
	cfg.Passive.Window, cfg.Passive.Age, cfg.Passive.Slow = *passWindow, *passAge, *passSlow
	if cfg.PassiveFrom, err = nodeagent.ParsePassiveFrom(*passFrom); err != nil {
		return err
	}
	if *passEvery <= 0 {
		return fmt.Errorf("-passive-interval %v: give how often HAProxy's counters and the access log are read, e.g. 1s", *passEvery)
	}
	cfg.PassiveInterval = *passEvery
	switch {
	case *canaryEvery == 0:
		cfg.CanaryInterval = nodeagent.NoCanaries
	case *canaryEvery < 0:
		return fmt.Errorf("-canary-interval %v: use a positive duration such as 5s, or 0 to send no canaries", *canaryEvery)
	default:
		cfg.CanaryInterval = *canaryEvery
	}
	if *retries == 0 {
		cfg.Proxy.Retries = proxy.NoRetries
	}
	if *concurrency < 1 {
		return fmt.Errorf("-concurrency %d: use a whole number from 1 to %d (the most probes in flight at once)", *concurrency, nodeagent.MaxConcurrency)
	}
	cfg.Spread = *spread
	if *spread == 0 {
		cfg.Spread = nodeagent.NoSpread
	}
	if *tokenEnv != "" {
		cfg.Token = os.Getenv(*tokenEnv)
		if cfg.Token == "" {
			return fmt.Errorf("-token-env %s: the variable is empty or not set: export it with the gateway's token", *tokenEnv)
		}
	}
	if *cpTokenEnv != "" {
		cfg.ControlPlaneToken = os.Getenv(*cpTokenEnv)
		if cfg.ControlPlaneToken == "" {
			return fmt.Errorf("-control-plane-token-env %s: the variable is empty or not set", *cpTokenEnv)
		}
	}
	if cfg.GatewayTLS, err = gatewayTLS(*tlsCA, *tlsCert, *tlsKey, *tlsName); err != nil {
		return err
	}
	if cfg.ControlPlaneTLS, err = controlPlaneTLS(*cpCA, *cpCert, *cpKey); err != nil {
		return err
	}
	if *originCA != "" {
		roots, err := originRoots(*originCA)
		if err != nil {
			return err
		}
		cfg.Proxy.TLS = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
		cfg.ProbeRootCAs = roots
	}
	if *stateDir != "" {
		if err := os.MkdirAll(*stateDir, 0o750); err != nil {
			return fmt.Errorf("-state-dir: %w", err)
		}
	}
	a, err := newAgent(cfg)
	if err != nil {
		return err
	}
	// SIGHUP (systemctl reload, a logrotate hook, a closed terminal)
	// re-reads the files that can change without a restart and never ends
	// the process; SIGTERM and SIGINT drain the visitors and end it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	files := reloadFiles{tlsCA: *tlsCA, tlsCert: *tlsCert, tlsKey: *tlsKey, tlsName: *tlsName,
		cpCA: *cpCA, cpCert: *cpCert, cpKey: *cpKey, originCA: *originCA, edges: edges}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				files.reload(a, log)
			}
		}
	}()
	err = a.Run(ctx)
	if ctx.Err() != nil && err == nil {
		log.Info("stopped", "reason", "SIGTERM or SIGINT")
	}
	return err
}

// gatewayTLS is the TLS configuration of the gateway link from -tls-ca,
// -tls-cert, -tls-key and -tls-server-name; nil when neither a CA nor a
// certificate is given (no TLS).
func gatewayTLS(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	if caFile == "" && certFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca %s: no PEM certificate in it", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("give both -tls-cert and -tls-key, or neither")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// newLogger is vigil-node's logger, writing to w.
func newLogger(level string, json bool, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "vigil-node", Level: hclog.LevelFromString(level), JSONFormat: json, Output: w})
}

// originRoots is the system's roots (none where the system has no pool)
// with the CA certificates of the PEM file at path added: what -origin-ca
// makes the proxy and the probes trust.
func originRoots(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-origin-ca: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("-origin-ca %s: no PEM certificate in it: give the CA's certificate (-----BEGIN CERTIFICATE-----)", path)
	}
	return roots, nil
}

// controlPlaneTLS is the TLS configuration of https control planes from
// -control-plane-ca (added to the system's roots), -control-plane-cert and
// -control-plane-key; nil when none is given.
func controlPlaneTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("-control-plane-ca: %w", err)
		}
		roots, err := x509.SystemCertPool()
		if err != nil || roots == nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-control-plane-ca %s: no PEM certificate in it: give the CA's certificate (-----BEGIN CERTIFICATE-----), the one the API's cert_file was signed with", caFile)
		}
		tc.RootCAs = roots
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("give both -control-plane-cert and -control-plane-key, or neither")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("-control-plane-cert/-control-plane-key: %w (give the PEM certificate and its own private key)", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
