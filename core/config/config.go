package config

import (
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
)

// Defaults of the settings an operator may leave out.
const (
	DefaultRoundInterval      = 30 * time.Second
	DefaultSitesPerRound      = 500
	DefaultDataDir            = "data"
	DefaultPluginDir          = "bin"
	DefaultSourceTimeout      = 10 * time.Second
	DefaultProbeTimeout       = 5 * time.Second
	DefaultHealthPath         = "/"
	DefaultHealthyThreshold   = 2
	DefaultUnhealthyThreshold = 3
	DefaultAPIListen          = "127.0.0.1:8470"
	DefaultUserAgent          = "cdnca-control-api/origin-probe"
)

// Config is a whole loaded configuration.
type Config struct {
	Control Control
	// Sources in declaration order: the vote chain.
	Sources []*Source
	// Sites in declaration order.
	Sites []*Site
	// Notifiers are the `notify "KIND" "NAME"` blocks, in order.
	Notifiers []*Notifier
	// DNS is the `publish "dns"` block, nil when absent.
	DNS *DNSPublisher
	// DNSUpdate is the `publish "dns_update"` block, nil when absent.
	DNSUpdate *DNSUpdatePublisher
	// Files holds the parsed files, for printing diagnostics with source
	// snippets.
	Files map[string]*hcl.File

	indexOnce sync.Once
	siteIndex map[string]*Site
}

// Notifier is one `notify "webhook" "NAME"` block.
type Notifier struct {
	// Kind is NotifierWebhook or NotifierAlertmanager.
	Kind string
	Name string
	// URL is a webhook's URL as written; URLEnv and URLFile name where to
	// read it instead (the environment variable, the file), at start, so
	// that a URL holding a secret need not be written in the
	// configuration. Exactly one of the three is set.
	URL, URLEnv, URLFile string
	// Format is a webhook's body: "json" or "slack".
	Format string
	// Events are the event kinds a webhook gets (origin_state,
	// level_switched, failback_available, all_levels_unhealthy); nil
	// means DefaultWebhookEvents.
	Events []string
	// Headers are extra request headers as written; HeaderEnv maps a
	// header to the environment variable holding its value (read at
	// start, never logged), such as Authorization = "HOOK_AUTH".
	Headers   map[string]string
	HeaderEnv map[string]string
	// Timeout bounds one delivery attempt.
	Timeout time.Duration

	// Alertmanager: the base URLs of the Alertmanagers (an HA pair gets
	// every alert at each), the installation name carried as the label
	// vigil, how often the active alerts are sent again, and the URL of
	// vigil's status page for generatorURL (empty: the API's address).
	URLs           []string
	Installation   string
	ResendInterval time.Duration
	ExternalURL    string

	DeclRange hcl.Range
}

// The notifier kinds.
const (
	NotifierWebhook      = "webhook"
	NotifierAlertmanager = "alertmanager"
)

// DefaultWebhookEvents are the event kinds a webhook gets when it names
// none: the notices of a site's level.
var DefaultWebhookEvents = []string{"level_switched", "failback_available", "all_levels_unhealthy"}

// DefaultResendInterval is how often an Alertmanager gets the active
// alerts again, as Prometheus resends them.
const DefaultResendInterval = time.Minute

// DNSPublisher is the `publish "dns"` block: vigil's authoritative DNS
// server for the sites in Zone.
type DNSPublisher struct {
	Listen string
	// Zone is a fully qualified zone name, such as "cdn.example.net.".
	Zone string
	TTL  int
	// TransitionTTL is the TTL of a site's records while it is failed
	// over, ramping back or has an origin down (0: the same as TTL).
	TransitionTTL int
	NS            []string
	// NSAddresses are the addresses of the name servers in NS that lie
	// inside Zone (fully qualified name -> IPv4 and IPv6 addresses),
	// answered as their A and AAAA records and as glue.
	NSAddresses map[string][]string
	// FailClosed answers SERVFAIL instead of failing open when every
	// enabled origin of the current level is unhealthy.
	FailClosed bool
	// RName is the SOA's responsible mailbox as a domain name
	// ("hostmaster.cdn.example.net."); "" means hostmaster.<zone>.
	RName string
	// SOARefresh, SOARetry and SOAExpire are the SOA timers in seconds,
	// what secondaries of a hidden primary follow.
	SOARefresh, SOARetry, SOAExpire int
	// AllowTransfer are the prefixes (a bare address is a /32 or /128)
	// that may transfer the zone (AXFR, IXFR); empty refuses transfers.
	AllowTransfer []string
	// Notify are the secondaries (host:port) sent a NOTIFY when the zone
	// changes.
	Notify []string
	// TSIGKey names the TSIG key (fully qualified) transfers need and
	// NOTIFY is signed with; TSIGAlgorithm is its algorithm; the secret
	// is read from the environment variable TSIGSecretEnv at start.
	TSIGKey, TSIGAlgorithm, TSIGSecretEnv string
	// RRLRate is the UDP answers per second one client network (a /24,
	// a /56) gets, 0 for no limit; past it every RRLSlip-th answer is
	// sent empty and truncated (0: none) and the rest dropped. Clients in
	// RRLExempt (prefixes) are not limited.
	RRLRate, RRLSlip int
	RRLExempt        []string
	DeclRange        hcl.Range
}

// DNSUpdatePublisher is the `publish "dns_update"` block: RFC 2136
// dynamic updates of each site's addresses into Zone, which the
// operator's primary at Server serves.
type DNSUpdatePublisher struct {
	// Server is the primary's address and port.
	Server string
	// Zone is the zone updated, fully qualified.
	Zone string
	// TTL and TransitionTTL are the records' TTL when the site is settled
	// and while it moves (0: TTL).
	TTL, TransitionTTL int
	// TSIGKey, TSIGAlgorithm and TSIGSecretEnv are the TSIG key updates
	// are signed with, as in DNSPublisher.
	TSIGKey, TSIGAlgorithm, TSIGSecretEnv string
	// Timeout is the deadline of one exchange with the primary.
	Timeout   time.Duration
	DeclRange hcl.Range
}

// Control is the `control` block.
type Control struct {
	RoundInterval time.Duration
	// SitesPerRound is sites_per_round; with "auto" it is
	// DefaultSitesPerRound, the least a round is sized to (what a
	// confirmation round's confirm_budget, validate and the file-limit
	// check count from).
	SitesPerRound int
	// SitesPerRoundAuto is sites_per_round = "auto": the engine sizes
	// each round from the time the last rounds took (docs/config.md).
	SitesPerRoundAuto bool
	DataDir           string
	PluginDir         string
	API               API
	// Store is the `store "etcd"` block; nil keeps the embedded bbolt
	// store in DataDir.
	Store *EtcdStore
	// Partition is the `partition` block (path-partition detection,
	// docs/partition.md); nil: off.
	Partition *Partition
	// HistoryRounds is control { history { rounds } }: the rounds the
	// history keeps; with keep set, keep / round_interval rounded up, at
	// most MaxHistoryRounds; with neither, DefaultHistoryKeep's.
	HistoryRounds int
	// HistoryKeep is control { history { keep } } (DefaultHistoryKeep
	// when neither keep nor rounds is set; 0 with rounds).
	HistoryKeep time.Duration
	// ProbeSeriesSites is control { metrics { probe_series_sites } }; nil
	// when unset (see ProbeSeries).
	ProbeSeriesSites *int
	// ConfirmBudget is control { confirm_budget }: a confirmation round
	// probes at most this per cent of SitesPerRound (at least one site).
	ConfirmBudget int
}

// ConfirmSites is how many sites one confirmation round may probe: the
// confirm_budget per cent of sites_per_round, at least one.
func (c *Control) ConfirmSites() int {
	pct := c.ConfirmBudget
	if pct <= 0 {
		pct = DefaultConfirmBudget
	}
	return max(1, c.SitesPerRound*pct/100)
}

// Store modes of the etcd block.
const (
	ModeActiveStandby = "active-standby"
	ModeSharded       = "sharded"
)

// Defaults of the etcd store block.
const (
	DefaultEtcdPrefix      = "/vigil"
	DefaultEtcdLeaseTTL    = 10 * time.Second
	DefaultEtcdDialTimeout = 5 * time.Second
	DefaultEtcdMaxTxnOps   = 128
	// DefaultEtcdCompactionInterval is how often the cluster compacts
	// etcd's history (kube-apiserver's default too).
	DefaultEtcdCompactionInterval = 5 * time.Minute
)

// EtcdStore is the `control { store "etcd" { } }` block: the state lives
// in etcd and several agents share it, either one leader and standbys
// (mode "active-standby") or every agent probing its share of the sites
// (mode "sharded").
type EtcdStore struct {
	// Endpoints are etcd client URLs or host:port pairs.
	Endpoints []string
	// Prefix is the key prefix of everything vigil keeps, such as "/vigil".
	Prefix string
	// LeaseTTL is the lease of the leader key and of the membership key:
	// how long a silent instance keeps its role.
	LeaseTTL time.Duration
	// Mode is ModeActiveStandby or ModeSharded.
	Mode        string
	DialTimeout time.Duration
	// UsernameEnv and PasswordEnv name environment variables holding
	// etcd credentials.
	UsernameEnv string
	PasswordEnv string
	// ID names this instance in the cluster (default: host name and API
	// port); Advertise is the API URL other instances name in their
	// errors (default: http:// plus the API listen address).
	ID        string
	Advertise string
	// CAFile, CertFile and KeyFile are TLS to etcd: the CA that signed
	// the members' certificates (besides the system's roots), and this
	// instance's client certificate and key for a cluster started with
	// --client-cert-auth. Absolute paths; empty when unset.
	CAFile, CertFile, KeyFile string
	// MaxTxnOps is etcd's --max-txn-ops: a commit larger than this is
	// split and made visible by one commit marker (see core/store/etcdstore).
	MaxTxnOps int
	// CompactionInterval is how often one instance of the cluster
	// compacts etcd's history to the revision of one interval before; 0
	// never (etcd compacts itself, --auto-compaction-retention).
	CompactionInterval time.Duration
	DeclRange          hcl.Range
}

// API is the `control { api { } }` block.
type API struct {
	// Listen is the address of the HTTP API.
	Listen string
	// TokenEnv names an environment variable holding the bearer token.
	TokenEnv string
	// TokenFile is a file holding the bearer token.
	TokenFile string
	// ReadTokenEnv and ReadTokenFile give a token of the read scope
	// (reads, no change); NodeTokenEnv and NodeTokenFile one of the node
	// scope (the publication and the sites only). The env wins over the
	// file, as for the operator's token.
	ReadTokenEnv, ReadTokenFile string
	NodeTokenEnv, NodeTokenFile string
	// ReadAccess is "open" (reads need no token) or "token".
	ReadAccess string
	// TLS, when set, makes the API serve https (the tls block).
	TLS *APITLS
}

// Source is one `source "NAME"` block: one link of the vote chain.
type Source struct {
	Name     string
	Plugin   string
	MinVotes int
	Tally    vote.Tally
	// Timeout is the deadline for this source in one round: as set
	// (TimeoutSet), or its share of round_interval (see ChainBudget).
	Timeout    time.Duration
	TimeoutSet bool
	// TimeoutRange is where the timeout attribute is, for diagnostics.
	TimeoutRange hcl.Range
	// Checksum is "sha256:<hex>" or empty.
	Checksum string
	// Env names the host environment variables passed to the plugin.
	Env []string
	// PlaintextTransport is auto_mtls = false: the host talks to the
	// plugin without go-plugin's AutoMTLS (for a plugin in a language that
	// cannot do it; warned at every load and start).
	PlaintextTransport bool
	// Config is the plugin's own `config { }` block, undecoded (nil when
	// absent). The plugin's schema decodes it.
	Config hcl.Body
	// ConfigText is the block's text as written, between its braces.
	ConfigText string
	DeclRange  hcl.Range
}

// Rule is the source's settling rule for the vote chain.
func (s *Source) Rule() vote.Rule { return vote.Rule{MinVotes: s.MinVotes, Tally: s.Tally} }

// Site is one `site "NAME"` block.
type Site struct {
	Name     string
	Hostname string
	Failback decide.Failback
	// Sources names the chain subset the site uses, in chain order
	// (declaration order of the sources, whatever order the site lists
	// them in). All sources when the site does not say.
	Sources []string
	// HealthCheck is the site's `health_check` block, defaults filled in.
	// Sites with the same settings share one value: treat it as read-only.
	HealthCheck *HealthCheck
	Origins     []*Origin
	DeclRange   hcl.Range
}

// HealthCheck is a site's `health_check` block.
type HealthCheck struct {
	Enabled bool
	Path    string
	// Timeout is the probe timeout: as set, or DefaultProbeTimeout. When
	// it is not set (TimeoutSet false), each source probes with the
	// shorter of it and what fits the source's deadline (ProbeTimeout).
	Timeout    time.Duration
	TimeoutSet bool
	// TimeoutRange is where the timeout attribute is, for diagnostics.
	TimeoutRange       hcl.Range
	UnhealthyThreshold int
	HealthyThreshold   int
	UserAgent          string
	// Opt-in stricter checks: each can only turn an up into a down.
	ExpectedStatus []int
	ExpectedBody   string
	MaxLatency     time.Duration

	// CAFile is the ca_file attribute as written; CA holds its PEM
	// certificates (read and checked at load), trusted for this site's
	// origins instead of the system's roots. CAName names the bundle in
	// ballots: a digest of CA.
	CAFile string
	CA     []byte
	CAName string
	// TLSServerName is the name to verify the origin's certificate against
	// (and to send as SNI) when it is not the site's hostname.
	TLSServerName string
	// InsecureSkipTLSVerify turns certificate verification off.
	InsecureSkipTLSVerify bool
	// Headers are extra request headers of every probe.
	Headers map[string]string
	// FollowRedirects follows redirects that stay on the origin's host.
	FollowRedirects bool
	// MaxBody is the most bytes of a response body a probe reads; 0 means
	// the probe's default (1 MiB).
	MaxBody int64
	// AntiFlap is the site's anti-flap rules (healthcheck.go); nil when
	// none is set.
	AntiFlap *AntiFlap
	// ConfirmInterval is confirm_interval (docs/decisions.md, fast
	// confirmation): when the site's verdicts go against its origins'
	// states, it is probed again this long after its last probe, between
	// rounds. 0: off.
	ConfirmInterval time.Duration
	// ConfirmRange is where confirm_interval is, for diagnostics.
	ConfirmRange hcl.Range
}

// ProbeTimeout is the probe timeout of this site's targets in a source
// whose deadline is deadline: the timeout as set, or else the default
// shortened to what fits the deadline.
func (hc *HealthCheck) ProbeTimeout(deadline time.Duration) time.Duration {
	if hc.TimeoutSet {
		return hc.Timeout
	}
	return min(hc.Timeout, MaxProbeTimeout(deadline))
}

// Origin is one `origin "NAME"` block.
type Origin struct {
	Name string
	// Address is the origin's URL: scheme, host and optional port, checked
	// by the loader.
	Address   string
	Level     int
	Enabled   bool
	DeclRange hcl.Range
}

// Source returns the named source, or nil.
func (c *Config) Source(name string) *Source {
	for _, s := range c.Sources {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// ForgetText drops the files' text, kept for printing diagnostics with
// snippets, once nothing will print them (an agent that started): a
// 100,000-site file is 16 MB. Diagnostics printed afterwards still name
// file:line:col, without the snippet.
func (c *Config) ForgetText() {
	for name, f := range c.Files {
		c.Files[name] = &hcl.File{Nav: f.Nav}
	}
}

// Site returns the named site, or nil. The first call indexes the sites:
// a Config is not changed after it is loaded.
func (c *Config) Site(name string) *Site {
	c.indexOnce.Do(func() {
		c.siteIndex = make(map[string]*Site, len(c.Sites))
		for _, s := range c.Sites {
			c.siteIndex[s.Name] = s
		}
	})
	return c.siteIndex[name]
}
