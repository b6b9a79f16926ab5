package node

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"net"
	"os"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/internal/labels"
	"github.com/vigilcdn/vigil/sdk"
)

// Defaults of the config attributes.
const (
	// DefaultNodesPerRound is how many nodes probe each origin per round:
	// three, so that the shipped min_votes = 2 can be reached with one node
	// missing and a 2-1 split still has a majority.
	DefaultNodesPerRound = 3
	// DefaultOnlineTimeout is how long a node stays online without a
	// heartbeat. Nodes send one every third of it, so one or two lost
	// heartbeats do not drop a node, and a dead one is noticed within a
	// round of the default 30s round interval.
	DefaultOnlineTimeout = 15 * time.Second
	// DefaultForgetAfter is how long an offline node stays listed (as
	// offline, with its last-seen time) before it is forgotten: a day, long
	// enough to notice a node that died overnight.
	DefaultForgetAfter = 24 * time.Hour
	// DefaultPassiveMinRequests is the fewest requests (not ignored) a
	// node's passive window must hold for a passive vote; fewer abstain.
	DefaultPassiveMinRequests = 10
	// DefaultPassiveFailureRatio: a window whose failures (slow answers
	// included) are more than this part of its requests votes down.
	DefaultPassiveFailureRatio = 0.3
	// MaxNodesPerRound bounds nodes_per_round.
	MaxNodesPerRound = 100
	// DefaultSuspectInterval: after the passive trigger reported a site,
	// the gateway reports it again no sooner than this.
	DefaultSuspectInterval = 10 * time.Second
)

// settings is a checked configuration.
type settings struct {
	listen        string
	token         []byte // nil: no token check
	tlsConfig     *tls.Config
	mtls          bool
	nodesPerRound int
	onlineTimeout time.Duration
	forgetAfter   time.Duration
	helloTimeout  time.Duration
	siteLabels    map[string]labels.Set
	statusListen  string
	// passive: nodes cast passive votes (passive_votes = true).
	passive             bool
	passiveMinRequests  int
	passiveFailureRatio float64
	// trigger: nodes report failing passive windows between rounds, and
	// the gateway reports their sites as suspects (passive_trigger).
	trigger         bool
	suspectInterval time.Duration
}

func schema() sdk.Schema {
	return sdk.Schema{Attributes: []sdk.Attribute{
		{Name: "listen", Type: sdk.TypeString, Required: true, Description: "Address (host:port) the gateway listens on for node agents, e.g. \"0.0.0.0:8471\"."},
		{Name: "token_env", Type: sdk.TypeString, Description: "Name of an environment variable holding the token nodes must present (list it in the source's env = [...])."},
		{Name: "tls_cert_file", Type: sdk.TypeString, Description: "PEM certificate the gateway presents to nodes (turns TLS on)."},
		{Name: "tls_key_file", Type: sdk.TypeString, Description: "PEM private key of tls_cert_file."},
		{Name: "client_ca_file", Type: sdk.TypeString, Description: "PEM CA bundle: nodes must present a certificate it signed, naming their id (mTLS)."},
		{Name: "nodes_per_round", Type: sdk.TypeNumber, Description: fmt.Sprintf("Online nodes asked per origin in each round (default %d).", DefaultNodesPerRound)},
		{Name: "online_timeout", Type: sdk.TypeDuration, Description: fmt.Sprintf("A node without a heartbeat for this long is offline (default %s).", DefaultOnlineTimeout)},
		{Name: "hello_timeout", Type: sdk.TypeDuration, Description: fmt.Sprintf("A new stream that has not said hello within this long is closed and counted as a failed attempt of its address; a new connection must finish its TLS and HTTP/2 handshakes within it too (default %s, from 100ms to 5m).", DefaultHelloTimeout)},
		{Name: "forget_after", Type: sdk.TypeDuration, Description: fmt.Sprintf("An offline node stays listed, as offline with its last-seen time, for this long; then it is forgotten (default %s, must be longer than online_timeout; at most %d offline nodes are kept, the oldest forgotten first).", shortDuration(DefaultForgetAfter), MaxOfflineNodes)},
		{Name: "site_labels", Type: sdk.TypeStringList, Description: "Per-site node selection, entries \"SITE: key=value,...\": only nodes with all those labels probe SITE."},
		{Name: "status_listen", Type: sdk.TypeString, Description: "Optional host:port serving GET /v1/nodes as JSON: the online nodes, and the offline ones not forgotten yet."},
		{Name: "passive_votes", Type: sdk.TypeBool, Description: "Nodes that proxy also cast a passive vote per origin, as voter NODE/passive, from the real traffic of their proxy (default false). It is one more voter of this source: see min_votes in the plugin's README."},
		{Name: "passive_min_requests", Type: sdk.TypeNumber, Description: fmt.Sprintf("Fewest requests (ignored statuses not counted) a node's passive window must hold for a passive vote; fewer abstain (default %d).", DefaultPassiveMinRequests)},
		{Name: "passive_failure_ratio", Type: sdk.TypeNumber, Description: fmt.Sprintf("A passive window whose failures (5xx, timeouts, connection errors, slow answers) are more than this part of its requests votes down (default %v).", DefaultPassiveFailureRatio)},
		{Name: "passive_trigger", Type: sdk.TypeBool, Description: "With passive_votes, a node whose proxy's real traffic to an origin starts failing tells the gateway at once, between rounds; when its passive window would vote down, the gateway asks vigil to confirm the origin's site now rather than at its next scheduled round (default true when passive_votes is; needs vigil-node and vigil of this release or later, older ones just do without)."},
		{Name: "suspect_interval", Type: sdk.TypeDuration, Description: fmt.Sprintf("The passive trigger reports a site at most once per this interval, and an origin it found down once per this interval; its log line comes at most once per interval too (default %s, at least 1s).", DefaultSuspectInterval)},
	}}
}

// parseConfig checks cfg. getenv reads the plugin's environment.
func parseConfig(cfg sdk.Config, getenv func(string) string) (settings, error) {
	var diags sdk.Diagnostics
	st := settings{nodesPerRound: DefaultNodesPerRound, onlineTimeout: DefaultOnlineTimeout, forgetAfter: DefaultForgetAfter, helloTimeout: DefaultHelloTimeout, siteLabels: map[string]labels.Set{},
		passiveMinRequests: DefaultPassiveMinRequests, passiveFailureRatio: DefaultPassiveFailureRatio, suspectInterval: DefaultSuspectInterval}

	st.listen, _ = cfg.String("listen")
	if _, _, err := net.SplitHostPort(st.listen); err != nil {
		diags = append(diags, sdk.AttributeError("listen", "Invalid listen address",
			fmt.Sprintf("listen = %q: write host:port, e.g. \"0.0.0.0:8471\" (%v).", st.listen, err)))
	}
	if name, ok := cfg.String("token_env"); ok {
		tok := getenv(name)
		switch {
		case name == "":
			diags = append(diags, sdk.AttributeError("token_env", "Empty token_env", "Name the environment variable that holds the node token."))
		case tok == "":
			diags = append(diags, sdk.AttributeError("token_env", "Node token not set",
				fmt.Sprintf("The environment variable %s is empty or not passed to the plugin: set it in vigil's environment and list it in the source's env = [\"%s\"].", name, name)))
		default:
			st.token = []byte(tok)
		}
	}
	certFile, hasCert := cfg.String("tls_cert_file")
	keyFile, hasKey := cfg.String("tls_key_file")
	caFile, hasCA := cfg.String("client_ca_file")
	switch {
	case hasCert != hasKey:
		diags = append(diags, sdk.AttributeError("tls_cert_file", "Incomplete TLS settings", "Set both tls_cert_file and tls_key_file, or neither."))
	case hasCA && !hasCert:
		diags = append(diags, sdk.AttributeError("client_ca_file", "mTLS needs a server certificate", "Set tls_cert_file and tls_key_file too: client certificates are only checked over TLS."))
	case hasCert:
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			diags = append(diags, sdk.AttributeError("tls_cert_file", "Cannot load the TLS certificate", fmt.Sprintf("%v: check both files are PEM and belong together.", err)))
			break
		}
		st.tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if hasCA {
			pem, err := os.ReadFile(caFile)
			pool := x509.NewCertPool()
			if err == nil && !pool.AppendCertsFromPEM(pem) {
				err = fmt.Errorf("no PEM certificate in %s", caFile)
			}
			if err != nil {
				diags = append(diags, sdk.AttributeError("client_ca_file", "Cannot load the client CA", fmt.Sprintf("%v: point it at a PEM CA bundle.", err)))
				break
			}
			st.tlsConfig.ClientCAs = pool
			st.tlsConfig.ClientAuth = tls.RequireAndVerifyClientCert
			st.mtls = true
		}
	}
	if st.token == nil && !hasCA && len(diags) == 0 {
		diags = append(diags, sdk.AttributeError("", "Nodes are not authenticated",
			"Set token_env (a shared token) or client_ca_file (mTLS), or both: the gateway refuses to take votes from anyone who can reach it."))
	}
	if n, ok := cfg.Number("nodes_per_round"); ok {
		if n != math.Trunc(n) || n < 1 || n > MaxNodesPerRound {
			diags = append(diags, sdk.AttributeError("nodes_per_round", "Invalid nodes_per_round",
				fmt.Sprintf("nodes_per_round = %v: use a whole number from 1 to %d.", n, MaxNodesPerRound)))
		} else {
			st.nodesPerRound = int(n)
		}
	}
	if d, ok := cfg.Duration("online_timeout"); ok {
		if d < 300*time.Millisecond {
			diags = append(diags, sdk.AttributeError("online_timeout", "online_timeout too short",
				fmt.Sprintf("online_timeout = %s: use at least 300ms (nodes heartbeat every third of it).", d)))
		} else {
			st.onlineTimeout = d
		}
	}
	if d, ok := cfg.Duration("hello_timeout"); ok {
		if d < 100*time.Millisecond || d > 5*time.Minute {
			diags = append(diags, sdk.AttributeError("hello_timeout", "Invalid hello_timeout",
				fmt.Sprintf("hello_timeout = %s: use 100ms to 5m; vigil-node says hello right after connecting, so the default %s leaves room for a slow link.", d, DefaultHelloTimeout)))
		} else {
			st.helloTimeout = d
		}
	}
	forgetAfter, setForget := cfg.Duration("forget_after")
	if setForget {
		st.forgetAfter = forgetAfter
	}
	if st.forgetAfter <= st.onlineTimeout {
		fix := fmt.Sprintf("set forget_after longer than online_timeout, e.g. forget_after = %q (the default), or shorten online_timeout.", shortDuration(DefaultForgetAfter))
		if DefaultForgetAfter <= st.onlineTimeout {
			fix = fmt.Sprintf("set forget_after longer than online_timeout, e.g. forget_after = %q, or shorten online_timeout.", shortDuration(2*st.onlineTimeout))
		}
		diags = append(diags, sdk.AttributeError("forget_after", "forget_after not longer than online_timeout",
			fmt.Sprintf("forget_after = %s, online_timeout = %s: a node is offline only after online_timeout, so it would be forgotten before it was ever listed as offline: %s",
				shortDuration(st.forgetAfter), shortDuration(st.onlineTimeout), fix)))
	}
	if list, ok := cfg.Strings("site_labels"); ok {
		for i, entry := range list {
			site, sel, err := labels.ParseSiteSelector(entry)
			if err != nil {
				diags = append(diags, sdk.ElementError("site_labels", i, "Invalid site_labels entry", err.Error()))
				continue
			}
			if _, dup := st.siteLabels[site]; dup {
				diags = append(diags, sdk.ElementError("site_labels", i, "Site listed twice", fmt.Sprintf("site %q already has labels: merge the entries into one.", site)))
				continue
			}
			st.siteLabels[site] = sel
		}
	}
	if addr, ok := cfg.String("status_listen"); ok {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			diags = append(diags, sdk.AttributeError("status_listen", "Invalid status_listen address",
				fmt.Sprintf("status_listen = %q: write host:port, e.g. \"127.0.0.1:8472\" (%v).", addr, err)))
		}
		st.statusListen = addr
	}
	st.passive, _ = cfg.Bool("passive_votes")
	if n, ok := cfg.Number("passive_min_requests"); ok {
		if n != math.Trunc(n) || n < 1 || n > 10000 {
			diags = append(diags, sdk.AttributeError("passive_min_requests", "Invalid passive_min_requests",
				fmt.Sprintf("passive_min_requests = %v: use a whole number from 1 to 10000, at most the nodes' -passive-window (default 20).", n)))
		} else {
			st.passiveMinRequests = int(n)
		}
	}
	if r, ok := cfg.Number("passive_failure_ratio"); ok {
		if !(r > 0 && r < 1) {
			diags = append(diags, sdk.AttributeError("passive_failure_ratio", "Invalid passive_failure_ratio",
				fmt.Sprintf("passive_failure_ratio = %v: use a fraction between 0 and 1, e.g. 0.3 (more than 30%% of the requests failed).", r)))
		} else {
			st.passiveFailureRatio = r
		}
	}
	st.trigger = st.passive
	if on, ok := cfg.Bool("passive_trigger"); ok {
		if on && !st.passive {
			diags = append(diags, sdk.AttributeError("passive_trigger", "passive_trigger needs passive_votes",
				"The trigger judges a node's passive window by the passive vote rule: set passive_votes = true too, or leave passive_trigger out."))
		}
		st.trigger = on && st.passive
	}
	if d, ok := cfg.Duration("suspect_interval"); ok {
		if d < time.Second {
			diags = append(diags, sdk.AttributeError("suspect_interval", "suspect_interval too short",
				fmt.Sprintf("suspect_interval = %s: use at least 1s (a site is reported at most once per interval).", d)))
		} else {
			st.suspectInterval = d
		}
	}
	return st, diags.Err()
}
