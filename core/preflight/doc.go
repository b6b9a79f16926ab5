// Package preflight checks a loaded configuration the way the agent takes
// it before its first round, short of probing origins: what `vigil
// validate` runs after config.Load, so that a configuration it passes is
// one the agent starts with.
//
// It reuses the agent's own code wherever the agent checks something, so
// that the two cannot drift: the vote sources are built by
// engine.PluginSource and checked by pluginhost's Source.Check (the same
// binary lookup and checksum as the agent's launch, then Start itself:
// launch, Info, ConfigSchema, the host's decode of the `config { }` block
// against the schema, and the plugin's Configure); the DNS publisher is
// built by dns.New and started by its Start; the probe timeouts are those
// of config.HealthCheck.ProbeTimeout, which the engine calls.
//
// # What is checked
//
//   - data_dir: not a file (the agent creates it when missing; the state
//     in it is `vigil state check`'s business and is not opened).
//   - The API token: token_env set and not empty, token_file readable and
//     not empty, as the agent reads them (never shown).
//   - Each source: the plugin binary found (the `plugin` attribute at
//     fault) and its checksum (the `checksum` attribute); env variables
//     that are not set (a warning, as the agent only logs them); then the
//     plugin launched and its config block decoded against its schema (an
//     unknown attribute, a wrong type: at the attribute inside `config`)
//     and configured, the plugin's own diagnostics at the attribute they
//     name. The sources are checked concurrently, as the engine starts
//     them, and every plugin process is stopped before Check returns.
//   - The listen addresses of the core configuration, the API's and the
//     DNS publisher's: host:port with a valid port (at the `listen`
//     attribute), bound and let go at once; an API and a DNS publisher on
//     one TCP port.
//   - The probe timeout that the engine shortens silently: a site without
//     health_check { timeout } probes with the shorter of the default and
//     what fits its source's deadline. That gets a warning per source,
//     naming the sites and the deadline that would not shorten it. A set
//     timeout that does not fit, and deadlines that exceed round_interval,
//     are config.Load's diagnostics already.
//   - The etcd store: unless offline, etcd is asked how many operations a
//     transaction may have, as the agent asks when it joins (the store's
//     ProbeLimit: transactions of comparisons only, which write nothing);
//     a max_txn_ops above that is a warning (the agent splits by what
//     etcd takes), and so is an etcd that does not answer. Notes says how
//     the largest round of the configuration will be saved.
//   - Scale: more eligible sites (health check on, two enabled origins)
//     than sites_per_round is a warning at that attribute, or at the
//     control block when it is not written, giving the full cycle
//     (ceil(sites / sites_per_round) x round_interval) and the detection
//     time that follows (ScaleOf; the agent logs the same at start and on
//     reload). With sites_per_round = "auto" the count is against the
//     500 its rounds start at, and the warning says the rounds grow from
//     there. In sharded mode the count is the whole fleet's. FileLimitOf
//     compares the open-file limit with the direct probes a round wants in
//     flight; the agent warns of it (validate does not: the limit of the
//     shell running validate is rarely the agent's).
//
// Not checked: the state in etcd or in the state file, and anything a
// plugin checks only when it votes.
//
// # Side effects, and the agent running beside the check
//
// Configure runs for real, as `terraform validate` loads providers: a
// plugin that listens (the node gateway) binds its address until it is
// stopped, moments later (a node that attaches in that moment is dropped
// and attaches again, to the agent), and a plugin that calls an API at
// Configure (dnspup lists its nodes) makes that call. Likewise the API
// address is bound and the DNS publisher started, then closed at once.
// Nothing is written: no data_dir, no state, no configuration cache.
//
// Where an agent with this configuration runs on the same machine, it
// holds those addresses. A bind that fails because the address is in use
// (EADDRINUSE: the API, the DNS publisher, or a plugin's Configure
// diagnostic that says so) is therefore a warning naming the address and
// the attribute, not an error: the check cannot tell the agent from
// another program holding it. Any other bind failure (an address not of
// this machine, a privileged port) is an error. A plugin's Configure stops
// at a failed bind, so what it checks after that goes unchecked; the
// warning says so.
//
// # Offline
//
// With Options.Offline nothing is started and nothing bound, for checking
// a configuration away from the machine it runs on: binaries are still
// found and their checksums verified (a missing binary is an error: that
// needs only the file system), listen addresses are checked for form, and
// an unset token_env is a warning. The config blocks of the plugins go
// unchecked, since only the plugin knows its schema.
//
// # Where diagnostics point
//
// The loaded configuration keeps few attribute ranges, so the file an
// attribute is in is parsed again, once, when a diagnostic needs one;
// without the file's text (after Config.ForgetText) it points at the
// block instead (a source's, the DNS publisher's), or names no line for
// the control block, whose header the configuration does not keep.
package preflight
