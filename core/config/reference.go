package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/vigilcdn/vigil/core/vote"
)

// This file describes, for operators, every block and attribute the loader
// accepts. docs/config.md is generated from it (go test ./docs -run
// TestConfigReference -update), and reference_test.go holds it to the
// loader's schemas (Schemas), so that neither can gain or lose an entry
// without the other, and to the loader's defaults.

// RefBlock describes one kind of block of the configuration.
type RefBlock struct {
	// Path names the block kind: the block types from the top level down,
	// joined by dots, with a kind label that selects the block's schema in
	// quotes: "control", "control.api", `control.store "etcd"`,
	// "site.origin", `notify "webhook"`. Names an operator chooses (a
	// site's name) are not part of it. Schemas is keyed by the same paths.
	Path string
	// Parent is the Path of the enclosing block, "" at the top level of a
	// file.
	Parent string
	// Type is the block type as written: "origin".
	Type string
	// Labels are the block's labels, in order.
	Labels []RefLabel
	// Repeat says how many blocks of this kind may appear, and where.
	Repeat string
	// Meaning says what the block is for.
	Meaning string
	// Attributes are the block's attributes, in the order the reference
	// lists them.
	Attributes []RefAttribute
	// Plugin is set on a block whose attributes are a plugin's own
	// (source.config): the loader keeps its body for the plugin's
	// ConfigSchema and has no schema of its own for it.
	Plugin bool
}

// RefLabel describes one label of a block.
type RefLabel struct {
	// Name is the label's name in the loader's schema ("name", "kind").
	Name string
	// Fixed is the only value the loader accepts for a kind label, such as
	// "webhook"; empty for a name the operator chooses.
	Fixed string
	// Meaning says what the label is.
	Meaning string
	// Example is a value of a name label (Fixed is the value of a kind
	// label).
	Example string
}

// RefAttribute describes one attribute of a block.
type RefAttribute struct {
	Name string
	// Type is the attribute's HCL type, as an operator writes it:
	// "string", "whole number", "bool", "duration" (a string such as
	// "30s"), "list of string", ...
	Type string
	// Required is set when the loader refuses the block without it.
	Required bool
	// Default is the value the loader uses when the attribute is left
	// out, as an HCL literal (`"30s"`, `500`, `true`); empty when it is
	// required or has no literal default.
	Default string
	// DefaultNote says in words what happens when the attribute is left
	// out, or qualifies Default; set whenever an optional attribute has no
	// Default.
	DefaultNote string
	// Meaning says what the attribute does, with the values the loader
	// accepts.
	Meaning string
	// Example is an HCL expression the loader accepts, such as `"10s"`.
	Example string
	// Instead names the attribute of the same block this one is an
	// alternative to: an example shows one of the two.
	Instead string
	// OneOfRequired is set on an attribute that the block needs unless an
	// attribute Instead of it is given (a webhook's url, url_env or
	// url_file): the loader checks that itself, the schema cannot.
	OneOfRequired bool
}

// hclString is s as an HCL string literal.
func hclString(s string) string { return strconv.Quote(s) }

// hclDuration is d as an HCL duration literal, such as "30s".
func hclDuration(d time.Duration) string {
	s := d.String()
	// As an operator writes it: "24h", "5m", "1m30s", not "24h0m0s".
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return hclString(s)
}

// Reference returns every block kind of the configuration, each parent
// before its children, in the order the reference presents them. Each
// call returns a new slice.
func Reference() []RefBlock {
	return []RefBlock{
		{
			Path: "control", Type: "control",
			Repeat:  "At most one, in any file.",
			Meaning: "The agent's own settings: the round, where the state and the plugins are, the HTTP API and the store. Every attribute may be left out.",
			Attributes: []RefAttribute{
				{Name: "round_interval", Type: "duration", Default: hclDuration(DefaultRoundInterval),
					Meaning: "How often a round starts. The chain's sources share it, less the engine's part (min(round_interval/10, 2s)): see the timeout of source and of health_check. Greater than 0.",
					Example: `"30s"`},
				{Name: "sites_per_round", Type: `whole number or "auto"`, Default: strconv.Itoa(DefaultSitesPerRound),
					Meaning: `The most sites one round probes, those probed longest ago first. At least 1. "auto" sizes each round from the time the last rounds took, from 500 up to every site this instance may probe: see "sites_per_round = auto" above.`,
					Example: `500`},
				{Name: "confirm_budget", Type: "whole number", Default: "10",
					Meaning: "The per cent of sites_per_round that one confirmation round (a site's health_check confirm_interval) may probe, at least one site: the sites in doubt longest since their last probe go first, the rest wait for the next confirmation or round. From 1 to 100. See docs/decisions.md.",
					Example: `10`},
				{Name: "data_dir", Type: "string", Default: hclString(DefaultDataDir),
					Meaning: "Folder of the embedded state file and its last-good copies, created when missing; a relative path is taken from the folder of the file that sets it (unset, the default is relative to the agent's working directory). Unused with a store \"etcd\" block. A change needs a restart.",
					Example: `"/var/lib/vigil"`},
				{Name: "plugin_dir", Type: "string", Default: hclString(DefaultPluginDir),
					Meaning: "Folder where a source's plugin given by bare name is looked up first, before PATH; a relative path is taken from the folder of the file that sets it (unset, the default is relative to the agent's working directory).",
					Example: `"/usr/lib/vigil"`},
			},
		},
		{
			Path: "control.api", Parent: "control", Type: "api",
			Repeat:  "At most one, in control.",
			Meaning: "The HTTP API: the CLI's commands, the status page, /metrics, and the publication that nodes and publishers follow.",
			Attributes: []RefAttribute{
				{Name: "listen", Type: "string", Default: hclString(DefaultAPIListen),
					Meaning: "Address (host:port) the API listens on. Not empty.",
					Example: `"127.0.0.1:8470"`},
				{Name: "token_env", Type: "string", DefaultNote: "none: without token_env or token_file the agent has no token and refuses every change",
					Meaning: "Name of the environment variable holding the operator's bearer token, the one that changes (switch, disable, enable, probe) need; it reads everything too. Read at start and at reload; an unset or empty variable stops the agent from starting.",
					Example: `"VIGIL_TOKEN"`},
				{Name: "token_file", Type: "string", DefaultNote: "none",
					Meaning: "File holding the bearer token (surrounding white space ignored); a relative path is taken from the folder of this file; used only when token_env is not set. An empty or unreadable file stops the agent from starting.",
					Example: `"/etc/vigil/api-token"`, Instead: "token_env"},
				{Name: "read_token_env", Type: "string", DefaultNote: "none",
					Meaning: "Name of the environment variable holding a token of the read scope: it reads everything (sites, events, nodes, /metrics, the publication) and changes nothing, for dashboards and scripts. It matters only with read_access = \"token\". An unset or empty variable stops the agent from starting.",
					Example: `"VIGIL_READ_TOKEN"`},
				{Name: "read_token_file", Type: "string", DefaultNote: "none",
					Meaning: "File holding the read-scope token; a relative path is taken from the folder of this file; used only when read_token_env is not set.",
					Example: `"/etc/vigil/api-read-token"`, Instead: "read_token_env"},
				{Name: "node_token_env", Type: "string", DefaultNote: "none",
					Meaning: "Name of the environment variable holding a token of the node scope: it reads only the publication and the sites, what vigil-node follows (-control-plane-token-env), so that an edge machine never holds the power to move traffic. It matters only with read_access = \"token\". An unset or empty variable stops the agent from starting.",
					Example: `"VIGIL_NODE_API_TOKEN"`},
				{Name: "node_token_file", Type: "string", DefaultNote: "none",
					Meaning: "File holding the node-scope token; a relative path is taken from the folder of this file; used only when node_token_env is not set.",
					Example: `"/etc/vigil/api-node-token"`, Instead: "node_token_env"},
				{Name: "read_access", Type: "string", Default: hclString("open"),
					Meaning: `"open": reads (sites, events, nodes, the publication, /metrics) need no token; "token": they need the token too, nodes following the publication included.`,
					Example: `"token"`},
			},
		},
		{
			Path: "control.api.tls", Parent: "control.api", Type: "tls",
			Repeat:  "At most one, in control.api. Without it the API serves plain http.",
			Meaning: "https for the API: the CLI, the status page, /metrics and the publication that nodes follow. The certificate and key are read at start and again at every SIGHUP, so a renewed certificate takes effect without a restart. Clients trust it with vigil -ca-cert (or VIGIL_CACERT) and vigil-node -control-plane-ca. See docs/tls.md.",
			Attributes: []RefAttribute{
				{Name: "cert_file", Type: "string", Required: true,
					Meaning: "PEM file of the API's certificate, its intermediate certificates after it; relative to the configuration file's folder. It must name the host clients connect to (a DNS name or IP address in its subject alternative names).",
					Example: `"tls/api.crt"`},
				{Name: "key_file", Type: "string", Required: true,
					Meaning: "PEM file of the certificate's private key; relative to the configuration file's folder. Keep it readable by the agent only.",
					Example: `"tls/api.key"`},
				{Name: "client_ca_file", Type: "string", DefaultNote: "none: clients need no certificate",
					Meaning: "PEM file of the CA certificates that sign client certificates: with it, every client (CLI, nodes, Prometheus, browsers) must present a certificate signed by one of them, besides the token where one is needed. Relative to the configuration file's folder.",
					Example: `"tls/ca.pem"`},
			},
		},
		{
			Path: "control.partition", Parent: "control", Type: "partition",
			Repeat:  "At most one, in control. Without it (the default) no path partition is looked for.",
			Meaning: "Path-partition detection: after each round the votes of each origin are grouped by source and by the value of a voter label (the node source's node labels); a group whose every voter votes the origin down for rounds rounds in a row while voters outside it vote up is a suspected path partition, announced with a path_partition_suspected event and shown on the status card. It never switches anything. See docs/partition.md.",
			Attributes: []RefAttribute{
				{Name: "label", Type: "string", Required: true,
					Meaning: "The voter label that groups the votes, such as the nodes' pop or region (vigil-node -labels pop=eu). Not empty.",
					Example: `"pop"`},
				{Name: "rounds", Type: "whole number", Default: strconv.Itoa(DefaultPartitionRounds),
					Meaning: "How many probed rounds of the site in a row a group must be alone against the others before the suspicion is announced. At least 1.",
					Example: `3`},
			},
		},
		{
			Path: "control.history", Parent: "control", Type: "history",
			Repeat:  "At most one, in control. Without it the history keeps 24 hours: keep = \"24h\".",
			Meaning: "The verdict history in data_dir/history.ring, which the status page's history strip, GET /v1/sites/{site}/history and vigil history export read (an agent with an etcd store keeps none). See docs/history.md.",
			Attributes: []RefAttribute{
				{Name: "rounds", Type: "whole number", DefaultNote: "Not set: keep sizes the history.",
					Meaning: "The history sized by rounds instead of by time: the agent's last rounds kept, from 1 to 1048576. Each costs 8 bytes for the whole file, not per origin; an origin keeps them within its 40 runs of rounds alike (docs/history.md). Set keep or rounds, not both. A change takes effect at the next start, which resizes the file and keeps its records.",
					Example: `2880`},
				{Name: "keep", Type: "duration", Default: hclDuration(DefaultHistoryKeep),
					Meaning: "How long the history keeps: keep / round_interval rounds, rounded up, at most 1048576 (a longer keep is capped with a warning saying what it keeps). At least one round_interval. An origin that changes more often than its 40 runs hold keeps less, and says so. Set keep or rounds, not both. A change of the rounds it gives takes effect at the next start, which resizes the file and keeps its records.",
					Example: `"8h"`, Instead: "rounds"},
			},
		},
		{
			Path: "control.metrics", Parent: "control", Type: "metrics",
			Repeat:  "At most one, in control.",
			Meaning: "What the agent's GET /metrics shows beyond its own series. See docs/metrics.md.",
			Attributes: []RefAttribute{
				{Name: "probe_series_sites", Type: "whole number", Default: strconv.Itoa(DefaultProbeSeriesSites),
					Meaning: "The largest fleet for which /metrics has the per-vote series (vigil_probe_success, vigil_probe_duration_seconds, vigil_probe_reason, and, for sources that report them, vigil_probe_http_status_code, vigil_probe_http_duration_seconds{phase} and vigil_probe_ssl_earliest_cert_expiry: one per origin, source and voter of each site's last round) and vigil_origin_info (one per origin); a larger fleet gets the per-origin series only. 0 turns them off. Each costs nothing between scrapes, but a scrape of 100,000 sites would be millions of lines.",
					Example: `1000`},
			},
		},
		{
			Path: `control.store "etcd"`, Parent: "control", Type: "store",
			Labels:  []RefLabel{{Name: "kind", Fixed: "etcd", Meaning: `The store kind; "etcd" is the only one.`}},
			Repeat:  "At most one, in control. Without it the state is kept in data_dir. A change needs a restart.",
			Meaning: "Keeps the state in etcd, shared by several agents: one leader that probes and standbys that serve reads (active-standby), or every agent probing its share of the sites (sharded). See docs/ha.md.",
			Attributes: []RefAttribute{
				{Name: "endpoints", Type: "list of string", Required: true,
					Meaning: "The etcd members' client addresses, as host:port or http(s)://host:port (no path or credentials); at least one.",
					Example: `["10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"]`},
				{Name: "prefix", Type: "string", Default: hclString(DefaultEtcdPrefix),
					Meaning: "Key prefix of everything vigil keeps in etcd; the agents of one cluster share it. Starts with /, does not end with one, no spaces.",
					Example: `"/vigil/prod"`},
				{Name: "lease_ttl", Type: "duration", Default: hclDuration(DefaultEtcdLeaseTTL),
					Meaning: "Lease of the leader key and of each instance's membership key: how long a silent instance keeps its role. Whole seconds, at least 2s.",
					Example: `"10s"`},
				{Name: "mode", Type: "string", Default: hclString(ModeActiveStandby),
					Meaning: fmt.Sprintf("%q: one leader probes and the others stand by, serve reads and refuse changes; %q: every instance probes its rendezvous-hashed share of the sites.", ModeActiveStandby, ModeSharded),
					Example: hclString(ModeSharded)},
				{Name: "dial_timeout", Type: "duration", Default: hclDuration(DefaultEtcdDialTimeout),
					Meaning: "How long connecting to etcd may take. Greater than 0.",
					Example: `"5s"`},
				{Name: "username_env", Type: "string", DefaultNote: "none: no authentication",
					Meaning: "Name of the environment variable holding the etcd user name. Set both username_env and password_env, or neither; both variables must be set when the agent starts.",
					Example: `"VIGIL_ETCD_USER"`},
				{Name: "password_env", Type: "string", DefaultNote: "none: no authentication",
					Meaning: "Name of the environment variable holding the etcd password; see username_env.",
					Example: `"VIGIL_ETCD_PASSWORD"`},
				{Name: "id", Type: "string", DefaultNote: `the host name, "-" and the API's port, such as "edge-a-8470"`,
					Meaning: "This instance's name in the cluster: unique per instance. Not empty.",
					Example: `"vigil-1"`},
				{Name: "advertise", Type: "string", DefaultNote: `"http://" and control.api's listen`,
					Meaning: "The http(s) URL of this instance's API that the other instances give (a standby refusing a change names the leader's).",
					Example: `"http://10.0.0.5:8470"`},
				{Name: "max_txn_ops", Type: "whole number", Default: strconv.Itoa(DefaultEtcdMaxTxnOps),
					Meaning: "The most operations vigil puts in one etcd transaction: the cluster's --max-txn-ops (etcd's default is 128). A round with more changes is split into several transactions and made visible at once by a final commit marker, so it is saved whole whatever its size. Each instance asks etcd its limit when it joins and splits by the smaller; vigil validate warns when this is above it. At least 16.",
					Example: `128`},
				{Name: "compaction_interval", Type: "duration", Default: hclDuration(DefaultEtcdCompactionInterval),
					Meaning: "How often the cluster compacts etcd's history: one instance a time (the leader, or one shard) drops every revision older than one interval, so that etcd's database does not grow until its space quota refuses every write. \"0\" never compacts: set it when etcd runs with its own --auto-compaction-retention. At least 1s otherwise. Defragmenting etcd stays the operator's job; see docs/ha.md.",
					Example: `"5m"`},
				{Name: "ca_file", Type: "string", DefaultNote: "none: the system's roots",
					Meaning: "PEM file of the CA that signed the etcd members' certificates, trusted besides the system's roots; relative to the configuration file's folder. Setting it (or cert_file) turns TLS on: endpoints are then https:// or host:port.",
					Example: `"tls/ca.pem"`},
				{Name: "cert_file", Type: "string", DefaultNote: "none",
					Meaning: "PEM file of this instance's client certificate, for an etcd started with --client-cert-auth; relative to the configuration file's folder. Needs key_file.",
					Example: `"tls/api.crt"`},
				{Name: "key_file", Type: "string", DefaultNote: "none",
					Meaning: "PEM file of cert_file's private key; relative to the configuration file's folder.",
					Example: `"tls/api.key"`},
			},
		},
		{
			Path: "source", Type: "source",
			Labels:  []RefLabel{{Name: "name", Meaning: "The source's name, unique: a site's sources list, votes, logs and metrics use it.", Example: "dnspup"}},
			Repeat:  fmt.Sprintf("Any number, at most %d; their order across the files is the chain's order.", vote.MaxSources),
			Meaning: "One vote source of the chain: an out-of-process plugin. Each round the unsettled origins are handed to the sources in order; an origin a source settles is not handed to a later one. A site with health checks needs at least one source.",
			Attributes: []RefAttribute{
				{Name: "plugin", Type: "string", Required: true,
					Meaning: "The plugin binary: a bare name is looked up in plugin_dir, then in PATH; a path (with a /) is used as it is, a relative one taken from the folder of this file. Not empty. `vigil plugin docs PLUGIN` prints the plugin's own config reference.",
					Example: `"vigil-source-dnspup"`},
				{Name: "min_votes", Type: "whole number", Default: "1",
					Meaning: "The fewest votes this source's verdict needs (it also needs a strict majority of up or down); with fewer, the origin passes on to the next source. At least 1.",
					Example: `2`},
				{Name: "tally", Type: "string", Default: hclString(vote.TallyOwn.String()),
					Meaning: `"own": judge on this source's votes alone; "carry": judge on every vote cast so far this round, earlier sources' included.`,
					Example: hclString(vote.TallyCarry.String())},
				{Name: "timeout", Type: "duration", DefaultNote: "its share of the round: what the sources with a timeout leave of round_interval's chain budget, shared equally (docs/probing.md)",
					Meaning: "This source's deadline in a round. Deadlines that add up to more than round_interval are a warning. Greater than 0.",
					Example: `"10s"`},
				{Name: "checksum", Type: "string", DefaultNote: "none: any binary found is run",
					Meaning: `"sha256:" and the 64 hexadecimal digits of the plugin binary's SHA-256 (as sha256sum prints it); any other binary is refused.`,
					Example: `"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"`},
				{Name: "env", Type: "list of string", Default: "[]",
					Meaning: "Names of the agent's environment variables passed to the plugin, which sees no others (a plugin setting ending in _env names one of these).",
					Example: `["DNSPUP_API_KEY", "DNSPUP_API_SECRET"]`},
				{Name: "auto_mtls", Type: "bool", Default: "true",
					Meaning: "false talks to the plugin in plaintext over its socket instead of the mutual TLS go-plugin sets up for each start: only for a plugin that cannot do AutoMTLS (a warning at every load and start; see sdk/PROTOCOL.md).",
					Example: `true`},
			},
		},
		{
			Path: "source.config", Parent: "source", Type: "config", Plugin: true,
			Repeat:  "At most one, in source.",
			Meaning: "The plugin's own settings, declared by its ConfigSchema and checked by the plugin when the agent (or vigil validate) starts it; its errors point at the attribute's file:line. Without it the plugin gets no settings. The shipped plugins' settings are listed below.",
		},
		{
			Path: "site", Type: "site",
			Labels:  []RefLabel{{Name: "name", Meaning: "The site's name, unique: the CLI, the API and the event journal use it. 1 to 63 letters, digits, '-', '_' or '.', beginning with a letter or a digit: it is a path segment of the API, a metrics label, a key of the state store and a word of the edge configuration vigil-node writes.", Example: "www"}},
			Repeat:  "Any number.",
			Meaning: "One site: its hostname, its origins grouped in levels, how they are probed, and which sources judge them.",
			Attributes: []RefAttribute{
				{Name: "hostname", Type: "string", Required: true,
					Meaning: "The site's DNS name: the Host header and TLS name of its probes, and the name published (publish \"dns\" answers it). A bare name, no scheme, port or path; lowercased.",
					Example: `"www.example.com"`},
				{Name: "failback", Type: "string", Default: hclString("auto"),
					Meaning: `"auto": switch back to a healthy higher level by itself; "manual": only announce that one is healthy again.`,
					Example: `"manual"`},
				{Name: "sources", Type: "list of string", DefaultNote: "every source, in chain order",
					Meaning: "The sources that judge this site's origins: declared source names, each once; they are asked in the chain's order, whatever the order here. Not empty.",
					Example: `["node", "direct"]`},
			},
		},
		{
			Path: "site.health_check", Parent: "site", Type: "health_check",
			Repeat:  "At most one, in site.",
			Meaning: "How the site's origins are probed and judged. A probe is one GET of the origin's address plus path, with the hostname as Host, on a new connection, read to the end of the body; a status below 500 is up. The extra checks (expected_status, expected_body, max_latency) only turn an up into a down. See docs/probing.md.",
			Attributes: []RefAttribute{
				{Name: "enabled", Type: "bool", Default: "true",
					Meaning: "false: the site is not probed and stays on its level (status paused); it then needs neither two enabled origins nor a source.",
					Example: `true`},
				{Name: "path", Type: "string", Default: hclString(DefaultHealthPath),
					Meaning: "Path (and optional query) probed on every origin. Starts with /; no spaces, control characters or fragment (#).",
					Example: `"/cdn-health"`},
				{Name: "timeout", Type: "duration", Default: hclDuration(DefaultProbeTimeout), DefaultNote: "shortened to what fits each source's deadline",
					Meaning: "Deadline of one probe: DNS, connect, TLS, headers and body. Set, it must fit the deadline of each of the site's sources (at most deadline - min(deadline/5, 1.5s)), or the load fails. Greater than 0.",
					Example: `"2s"`},
				{Name: "unhealthy_threshold", Type: "whole number", Default: strconv.Itoa(DefaultUnhealthyThreshold),
					Meaning: "Down verdicts in a row that make an origin unhealthy (a round without a verdict does not count). At least 1.",
					Example: `3`},
				{Name: "healthy_threshold", Type: "whole number", Default: strconv.Itoa(DefaultHealthyThreshold),
					Meaning: "Up verdicts in a row that make an origin healthy (a round without a verdict does not count). At least 1.",
					Example: `2`},
				{Name: "user_agent", Type: "string", Default: hclString(DefaultUserAgent),
					Meaning: "User-Agent header of the probes. Not empty.",
					Example: `"example-cdn-health/1.0"`},
				{Name: "expected_status", Type: "list of whole number", DefaultNote: "none: any status below 500 is up",
					Meaning: "The statuses that count as up: any other below 500 is down; a 5xx is always down. Codes from 100 to 599.",
					Example: `[200, 204]`},
				{Name: "expected_body", Type: "string", DefaultNote: "none",
					Meaning: "Text the body must contain (within its first max_body bytes), or the probe is down. At most 64KiB, and no longer than max_body.",
					Example: `"ok"`},
				{Name: "max_latency", Type: "duration", DefaultNote: "none",
					Meaning: "The longest the response headers may take, counted from the probe's start; a slower answer is down. Greater than 0.",
					Example: `"800ms"`},
				{Name: "ca_file", Type: "string", DefaultNote: "none: the system's roots",
					Meaning: "File of PEM certificates trusted for this site's origins instead of the system's roots (a private CA); relative to the folder of the file that names it. Read and checked at load.",
					Example: `"ca/private-ca.pem"`},
				{Name: "tls_server_name", Type: "string", DefaultNote: "the hostname",
					Meaning: "The name sent as SNI and verified in the origin's certificate, when it is not the hostname; the Host header stays the hostname.",
					Example: `"origin.internal"`},
				{Name: "insecure_skip_tls_verify", Type: "bool", Default: "false",
					Meaning: "true accepts any certificate, so a man in the middle or a wrong origin looks healthy; every load warns. Prefer ca_file or tls_server_name.",
					Example: `false`},
				{Name: "headers", Type: "map of string", DefaultNote: "none",
					Meaning: "Extra request headers of every probe. Host, User-Agent and the headers that frame a request (Content-Length, Transfer-Encoding, Connection, Upgrade, Te, Trailer, Keep-Alive, Proxy-Connection) are refused; values are never logged.",
					Example: `{ "X-Health-Token" = "s3cret" }`},
				{Name: "follow_redirects", Type: "bool", Default: "false",
					Meaning: "true follows redirects (at most 10) that keep the origin's scheme, port and host (the hostname or the address's); a redirect elsewhere is down. false: a 3xx is up.",
					Example: `true`},
				{Name: "max_body", Type: "size", Default: hclString("1MiB"),
					Meaning: `The most bytes of a body a probe reads: a whole number of bytes, or a string with a unit B, KB, KiB, MB, MiB, GB or GiB, such as "256KiB"; from 1 byte to 1GiB.`,
					Example: `"256KiB"`},
				{Name: "quarantine", Type: "duration", DefaultNote: "none: an origin is healthy again as soon as healthy_threshold says so",
					Meaning: "Anti-flap: an origin that became unhealthy is not judged healthy again before this has passed since (its good rounds still count; the change waits for the quarantine's end). Counted in rounds of round_interval, rounded up. Greater than 0. See docs/antiflap.md.",
					Example: `"5m"`},
				{Name: "failback_dwell", Type: "duration", DefaultNote: "none: an automatic failback happens at the first round a higher level is healthy",
					Meaning: "Anti-flap: the least time the site stays on a level that an automatic switch entered before an automatic failback leaves it. Never delays a failover, nor a failback away from an unhealthy level. Counted in rounds of round_interval, rounded up. Greater than 0. See docs/antiflap.md.",
					Example: `"10m"`},
				{Name: "confirm_interval", Type: "duration", DefaultNote: "none: a site is probed by the rounds alone",
					Meaning: "Fast confirmation: when a verdict goes against an origin's state (down while healthy or unknown, up while unhealthy), or a node's passive window trips, the site is probed again this long after its last probe, between rounds, until the state settles; these probes count toward the thresholds like a round. At least 500ms and less than round_interval. Bounded by control's confirm_budget. See docs/decisions.md.",
					Example: `"3s"`},
			},
		},
		{
			Path: "site.health_check.flap", Parent: "site.health_check", Type: "flap",
			Repeat:  "At most one, in health_check. Without it there is no flap damping.",
			Meaning: "Anti-flap: flap damping. More than changes state changes of an origin (between healthy and unhealthy, as the thresholds judge it) within within hold it unhealthy, with an origin_flapping event, until it has been stable for within. See docs/antiflap.md.",
			Attributes: []RefAttribute{
				{Name: "changes", Type: "whole number", Required: true,
					Meaning: "The most state changes allowed within within; one more holds the origin. At least 1.",
					Example: `4`},
				{Name: "within", Type: "duration", Required: true,
					Meaning: "The window the changes are counted in, and how long the origin must stay stable to be released. Counted in rounds of round_interval, rounded up. Greater than 0.",
					Example: `"10m"`},
			},
		},
		{
			Path: "site.health_check.ramp", Parent: "site.health_check", Type: "ramp",
			Repeat:  "At most one, in health_check. Without it an automatic failback moves all traffic at once.",
			Meaning: "Anti-flap: the failback ramp. An automatic failback away from a level that still works sends only the first step's per cent of new requests to the recovering level (the publication's ramp), the rest to the level left, and one step more each interval while the recovering level stays healthy, up to 100. A failure of the recovering level during the ramp fails over back at once. See docs/antiflap.md.",
			Attributes: []RefAttribute{
				{Name: "steps", Type: "list of whole numbers", Required: true,
					Meaning: "The per cents of new requests for the recovering level, ascending, each from 1 to 100, at least two, the last 100.",
					Example: `[5, 25, 100]`},
				{Name: "interval", Type: "duration", Required: true,
					Meaning: "The least time between two steps; a step due in a round whose recovering level is not healthy waits for a healthy round. Counted in rounds of round_interval, rounded up. Greater than 0.",
					Example: `"1m"`},
			},
		},
		{
			Path: "site.origin", Parent: "site", Type: "origin",
			Labels:  []RefLabel{{Name: "name", Meaning: "The origin's name, unique within the site. The same characters as a site's name: 1 to 63 letters, digits, '-', '_' or '.', beginning with a letter or a digit.", Example: "b1"}},
			Repeat:  "At least one per site, and two enabled ones while health checks are enabled.",
			Meaning: "One origin of the site, in one of its levels. When every enabled origin of the current level is unhealthy, the site switches to the next healthy level.",
			Attributes: []RefAttribute{
				{Name: "address", Type: "string", Required: true,
					Meaning: "The origin's absolute http or https URL: scheme, host (name or IP) and optional port; no path, query, fragment or credentials.",
					Example: `"https://backup.example.net"`},
				{Name: "level", Type: "whole number", Default: "1",
					Meaning: "The origin's level: 1 is the primary, higher levels are the backups, tried in order. At least 1.",
					Example: `2`},
				{Name: "enabled", Type: "bool", Default: "true",
					Meaning: "false disables the origin: it is left out of votes, level health and the publication, as vigil origin disable does.",
					Example: `true`},
			},
		},
		{
			Path: `notify "webhook"`, Type: "notify",
			Labels: []RefLabel{
				{Name: "kind", Fixed: "webhook", Meaning: `The notifier kind: "webhook" here, or "alertmanager" (below). The log gets every notice without a block.`},
				{Name: "name", Meaning: "The notifier's name, unique: a plain word, no spaces, slashes or parentheses. It keys the notifier's delivery cursor.", Example: "ops"},
			},
			Repeat:  "Any number.",
			Meaning: "A webhook that gets one POST per event of the kinds it asks for (by default the notices of a site's level: a switch, a failback available, all levels unhealthy), at least once: transport errors, 408, 429 and 5xx are retried without limit, and a restart resumes where delivery stopped; any other answer drops that notice, with an error in the log. A new webhook starts with the next event, not the history.",
			Attributes: []RefAttribute{
				{Name: "url", Type: "string", DefaultNote: "none: give url, url_env or url_file", OneOfRequired: true,
					Meaning: "The absolute http or https URL the notices are posted to. It may hold a token in its path or query: logs show only its scheme and host.",
					Example: `"https://hooks.example.com/vigil"`},
				{Name: "url_env", Type: "string", DefaultNote: "none", Instead: "url",
					Meaning: "The environment variable holding the URL, read when the agent starts (a secret URL need not be written in the configuration). Unset or empty stops the agent from starting.",
					Example: `"VIGIL_HOOK_URL"`},
				{Name: "url_file", Type: "string", DefaultNote: "none", Instead: "url",
					Meaning: "A file holding the URL (surrounding white space ignored), read when the agent starts; a relative path is taken from the folder of this file.",
					Example: `"/etc/vigil/hook-url"`},
				{Name: "format", Type: "string", Default: hclString("json"),
					Meaning: `"json": vigil's own body; "slack": a Slack incoming-webhook message. (For Alertmanager, declare notify "alertmanager".)`,
					Example: `"slack"`},
				{Name: "events", Type: "list of string", DefaultNote: `["level_switched", "failback_available", "all_levels_unhealthy"]`,
					Meaning: "The event kinds this webhook gets: origin_state (an origin became healthy, unhealthy, disabled...), level_switched, failback_available, all_levels_unhealthy, origin_flapping (a flapping hold began or ended), path_partition_suspected (a voter group alone sees an origin down, or no longer; docs/partition.md), drill_started and drill_ended (a failover drill; docs/drills.md), failover_timed (the time a failover took, once its nodes reported; docs/failover-time.md) and ramp_step (a failback ramp moved; docs/antiflap.md). Route origin changes to the team that pages on them.",
					Example: `["origin_state", "level_switched"]`},
				{Name: "headers", Type: "map of string", DefaultNote: "none",
					Meaning: "Extra request headers, as written (not for secrets: see header_env). Content-Type, Content-Length and Host are vigil's.",
					Example: `{ "X-Team" = "cdn" }`},
				{Name: "header_env", Type: "map of string", DefaultNote: "none",
					Meaning: "Extra request headers whose values are read from environment variables when the agent starts, such as an Authorization header; the values are never logged. An unset variable stops the agent from starting.",
					Example: `{ Authorization = "VIGIL_HOOK_AUTH" }`},
				{Name: "timeout", Type: "duration", Default: hclDuration(10 * time.Second),
					Meaning: "Deadline of one delivery attempt. Greater than 0.",
					Example: `"10s"`},
			},
		},
		{
			Path: `notify "alertmanager"`, Type: "notify",
			Labels: []RefLabel{
				{Name: "kind", Fixed: "alertmanager", Meaning: "The notifier kind."},
				{Name: "name", Meaning: "The notifier's name, unique among the notifiers: a plain word.", Example: "am"},
			},
			Repeat:  "Any number.",
			Meaning: "Alerts for Prometheus Alertmanager, sent as Prometheus sends them: states, not events. While a site is off its top level, every level of a site is unhealthy, a manual failback waits, or an origin is unhealthy or flapping, its alert (VigilSiteOnBackupLevel, VigilAllLevelsUnhealthy, VigilFailbackAvailable, VigilOriginUnhealthy, VigilOriginFlapping) is posted to each Alertmanager's /api/v2/alerts every resend_interval with an end a few intervals ahead, so that an Alertmanager restarted meanwhile has it back within one interval; when the state ends the alert is sent resolved. Alertmanager's grouping, inhibition and silences then work unchanged. Only the instance that leads sends.",
			Attributes: []RefAttribute{
				{Name: "urls", Type: "list of string", Required: true,
					Meaning: "The Alertmanagers' base URLs: each gets every alert (an HA pair of Alertmanagers deduplicates them).",
					Example: `["http://127.0.0.1:9093"]`},
				{Name: "installation", Type: "string", Default: hclString("vigil"),
					Meaning: "This vigil's name, carried by every alert as the label vigil, so that one Alertmanager can tell several installations apart.",
					Example: `"prod-eu"`},
				{Name: "resend_interval", Type: "duration", Default: hclDuration(DefaultResendInterval),
					Meaning: "How often the active alerts are sent again; each is sent with an end four intervals ahead. Greater than 0.",
					Example: `"1m"`},
				{Name: "external_url", Type: "string", DefaultNote: "the API's address (control { api { listen } })",
					Meaning: "The URL operators reach vigil's status page at, for each alert's generatorURL (a link to the site).",
					Example: `"https://vigil.example.com"`},
				{Name: "headers", Type: "map of string", DefaultNote: "none",
					Meaning: "Extra request headers, as written.",
					Example: `{ "X-Scope-OrgID" = "cdn" }`},
				{Name: "header_env", Type: "map of string", DefaultNote: "none",
					Meaning: "Extra request headers whose values are read from environment variables when the agent starts (an Authorization header for an Alertmanager behind a proxy); never logged.",
					Example: `{ Authorization = "VIGIL_AM_AUTH" }`},
				{Name: "timeout", Type: "duration", Default: hclDuration(10 * time.Second),
					Meaning: "Deadline of one request. Greater than 0.",
					Example: `"10s"`},
			},
		},
		{
			Path: `publish "dns"`, Type: "publish",
			Labels:  []RefLabel{{Name: "kind", Fixed: "dns", Meaning: `The publisher kind: vigil's own authoritative server, alone or as a hidden primary (nodes follow the publication through the API without a block).`}},
			Repeat:  "At most one.",
			Meaning: "An authoritative DNS server inside the agent, for one zone: a site whose hostname is in the zone gets A and AAAA records for the origins of its current level that are not unhealthy (a CNAME when they are all host names).",
			Attributes: []RefAttribute{
				{Name: "listen", Type: "string", Required: true,
					Meaning: "Address (host:port) the server listens on, UDP and TCP. Not empty.",
					Example: `"127.0.0.1:5353"`},
				{Name: "zone", Type: "string", Required: true,
					Meaning: "The zone answered, fully qualified (ending in a dot); a question outside it is refused.",
					Example: `"cdn.example.net."`},
				{Name: "ttl", Type: "whole number", Default: "30",
					Meaning: "TTL in seconds of every record, and the SOA's negative-caching TTL. A warning when it is longer than a site's failure detection (unhealthy_threshold x round_interval). From 0 to 2147483647.",
					Example: `30`},
				{Name: "ns", Type: "list of string", DefaultNote: "none: the apex has no NS records, and the SOA names the apex",
					Meaning: "The zone's name servers (fully qualified, ending in a dot), answered as the apex's NS records.",
					Example: `["ns1.cdn.example.net."]`},
				{Name: "ns_addresses", Type: "map of list of string", DefaultNote: "none: a warning for each name server of ns inside the zone, which would answer NXDOMAIN",
					Meaning: "Addresses (IPv4 and IPv6) of the name servers of ns that lie inside the zone, by fully qualified name: answered as their A and AAAA records, and as glue beside the apex's NS records. Every key must be in ns and inside the zone.",
					Example: `{ "ns1.cdn.example.net." = ["192.0.2.53", "2001:db8::53"] }`},
				{Name: "fail_closed", Type: "bool", Default: "false",
					Meaning: "What a site whose current level has no origin left that is not unhealthy gets: false answers every enabled origin (fail open); true answers SERVFAIL.",
					Example: `false`},
				{Name: "transition_ttl", Type: "whole number", DefaultNote: "half of ttl (15 with the default ttl)",
					Meaning: "TTL in seconds of a site's records while it moves: failed over (not on level 1), ramping back, or with an origin of its current level down; resolvers then come back sooner for the next move. Settled sites keep ttl. From 1 to ttl.",
					Example: `15`},
				{Name: "rname", Type: "string", DefaultNote: "hostmaster.ZONE",
					Meaning: "The SOA's responsible mailbox: a mailbox (a dot in its local part is escaped) or a fully qualified name ending in a dot.",
					Example: `"dns-admin@example.net"`},
				{Name: "soa_refresh", Type: "whole number", Default: "3600",
					Meaning: "The SOA's refresh timer in seconds: how often secondaries check the serial when no NOTIFY comes. At least 1.",
					Example: `300`},
				{Name: "soa_retry", Type: "whole number", Default: "600",
					Meaning: "The SOA's retry timer in seconds: how soon a secondary tries again after a failed check. At least 1.",
					Example: `60`},
				{Name: "soa_expire", Type: "whole number", Default: "604800",
					Meaning: "The SOA's expire timer in seconds: how long a secondary that cannot reach vigil keeps answering. At least 1.",
					Example: `604800`},
				{Name: "allow_transfer", Type: "list of string", DefaultNote: "none: zone transfers are refused",
					Meaning: "IP addresses and prefixes of the secondaries allowed to transfer the zone (AXFR, and IXFR from the last 32 publications), over TCP; with tsig_key they must sign with it too.",
					Example: `["192.0.2.53", "2001:db8::53"]`},
				{Name: "notify", Type: "list of string", DefaultNote: "none",
					Meaning: "Secondaries (IP address and port) sent a NOTIFY, signed with tsig_key when set, whenever a publication changes the zone, and at start; retried with backoff, failures logged and counted in vigil_dns_notify_total.",
					Example: `["192.0.2.53:53"]`},
				{Name: "tsig_key", Type: "string", DefaultNote: "none: transfers are not signed",
					Meaning: "Name of the TSIG key (fully qualified, ending in a dot) that transfers must be signed with and NOTIFY is signed with. Needs tsig_secret_env.",
					Example: `"vigil-xfr."`},
				{Name: "tsig_algorithm", Type: "string", Default: `"hmac-sha256"`,
					Meaning: "The TSIG key's algorithm: hmac-sha256, hmac-sha384, hmac-sha512, hmac-sha224 or hmac-sha1.",
					Example: `"hmac-sha256"`},
				{Name: "tsig_secret_env", Type: "string", DefaultNote: "none",
					Meaning: "Environment variable holding the TSIG key's secret in base64 (as tsig-keygen and keymgr print it), read at start; never logged. Needs tsig_key.",
					Example: `"VIGIL_TSIG_SECRET"`},
				{Name: "rrl_rate", Type: "whole number", Default: "200",
					Meaning: "Response rate limiting: UDP answers per second one client network (a /24 for IPv4, a /56 for IPv6) gets; past it answers are dropped or slipped. 0 turns it off. TCP is never limited. At least 0.",
					Example: `200`},
				{Name: "rrl_slip", Type: "whole number", Default: "2",
					Meaning: "Of the answers over rrl_rate, every rrl_slip-th is sent empty with the TC bit, so that a real resolver retries over TCP; the rest are dropped. 0 drops them all, 1 slips them all. At least 0.",
					Example: `2`},
				{Name: "rrl_exempt", Type: "list of string", DefaultNote: `["127.0.0.0/8", "::1/128"]`,
					Meaning: "IP addresses and prefixes never rate limited, such as the operator's own resolvers or monitoring.",
					Example: `["127.0.0.0/8", "::1/128", "192.0.2.0/24"]`},
			},
		},
		{
			Path: `publish "dns_update"`, Type: "publish",
			Labels:  []RefLabel{{Name: "kind", Fixed: "dns_update", Meaning: `The publisher kind: RFC 2136 dynamic updates into a zone the operator's own primary serves.`}},
			Repeat:  "At most one.",
			Meaning: "Pushes each site whose hostname is in the zone to the operator's primary (BIND, Knot, PowerDNS) with signed dynamic updates: the A and AAAA records publish \"dns\" would answer (IP origins only). The prerequisites are the records vigil last wrote, so a hand edit is reported as a conflict, not overwritten. Network errors and SERVFAIL are retried with backoff; failures are logged and counted in vigil_dns_update_total and vigil_dns_update_failing.",
			Attributes: []RefAttribute{
				{Name: "server", Type: "string", Required: true,
					Meaning: "The primary's IP address and port; updates go over TCP.",
					Example: `"192.0.2.53:53"`},
				{Name: "zone", Type: "string", Required: true,
					Meaning: "The zone updated, fully qualified (ending in a dot); sites outside it are not pushed.",
					Example: `"example.net."`},
				{Name: "ttl", Type: "whole number", Default: "30",
					Meaning: "TTL in seconds of the records of a settled site. At least 0.",
					Example: `30`},
				{Name: "transition_ttl", Type: "whole number", DefaultNote: "half of ttl (15 with the default ttl)",
					Meaning: "TTL in seconds of a site's records while it is failed over, ramping back or has an origin down. From 1 to ttl.",
					Example: `15`},
				{Name: "tsig_key", Type: "string", DefaultNote: "none: updates are not signed",
					Meaning: "Name of the TSIG key (fully qualified) updates are signed with; the primary must allow updates with it. Needs tsig_secret_env.",
					Example: `"vigil-update."`},
				{Name: "tsig_algorithm", Type: "string", Default: `"hmac-sha256"`,
					Meaning: "The TSIG key's algorithm: hmac-sha256, hmac-sha384, hmac-sha512, hmac-sha224 or hmac-sha1.",
					Example: `"hmac-sha256"`},
				{Name: "tsig_secret_env", Type: "string", DefaultNote: "none",
					Meaning: "Environment variable holding the TSIG key's base64 secret, read at start; never logged. Needs tsig_key.",
					Example: `"VIGIL_UPDATE_SECRET"`},
				{Name: "timeout", Type: "duration", Default: `"5s"`,
					Meaning: "Deadline of one exchange with the primary. Greater than 0.",
					Example: `"5s"`},
			},
		},
	}
}

// Schemas returns the loader's schemas keyed by RefBlock.Path, with "" for
// the top level of a file. A block whose attributes are a plugin's
// (source.config) has none. The schemas are copies: changing them does not
// change the loader.
func Schemas() map[string]*hcl.BodySchema {
	loader := map[string]*hcl.BodySchema{
		"":                       rootSchema,
		"control":                controlSchema,
		"control.api":            apiSchema,
		"control.api.tls":        apiTLSSchema,
		"control.partition":      partitionSchema,
		"control.history":        historySchema,
		"control.metrics":        metricsSchema,
		`control.store "etcd"`:   etcdSchema,
		"source":                 sourceSchema,
		"site":                   siteSchema,
		"site.health_check":      healthCheckSchema,
		"site.health_check.flap": flapSchema,
		"site.health_check.ramp": rampSchema,
		"site.origin":            originSchema,
		`notify "webhook"`:       webhookSchema,
		`notify "alertmanager"`:  alertmanagerSchema,
		`publish "dns"`:          dnsSchema,
		`publish "dns_update"`:   dnsUpdateSchema,
	}
	out := make(map[string]*hcl.BodySchema, len(loader))
	for path, s := range loader {
		c := &hcl.BodySchema{Attributes: slices.Clone(s.Attributes), Blocks: slices.Clone(s.Blocks)}
		for i := range c.Blocks {
			c.Blocks[i].LabelNames = slices.Clone(c.Blocks[i].LabelNames)
		}
		out[path] = c
	}
	return out
}
