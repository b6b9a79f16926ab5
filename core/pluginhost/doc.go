// Package pluginhost runs vote-source plugins: one [Source] per `source`
// block of the configuration.
//
// A Source launches its plugin binary (looked up in the plugin directory,
// then PATH) with hashicorp/go-plugin over gRPC and AutoMTLS, after checking
// its optional SHA-256 checksum. The plugin gets none of the host's
// environment but the variables the source names. Its log lines are
// re-emitted through the host's hclog logger under the source's name.
//
// [Source.Start] asks the plugin for its identity and config schema, decodes
// the source's `config { }` block against that schema and hands the values
// to the plugin; every problem, the host's or the plugin's, comes back as an
// hcl.Diagnostic at the file:line of the attribute at fault.
//
// The host offers vote-source protocols 1 and 2 in go-plugin's handshake
// (sdk/host.Plugins) and speaks the one the plugin picks. [Source.Vote]
// hands the plugin only the targets whose settings it declared a
// capability for (a protocol-1 plugin declares none, and gets no field of
// protocol 2); the others get an Abstain vote from the host (voter
// [HostVoter], reason unsupported), counted in [Stats].Unsupported. A
// check ([Source.Check], for `vigil validate`) warns at the source's block
// of each capability the source's sites need ([Needs]) that the plugin
// lacks. sdk/PROTOCOL.md states the promise.
//
// [Source.Vote] makes one call per round with the source's deadline. A
// plugin that crashes, hangs or answers garbage costs only its own votes:
// the call returns an error (the chain treats it as abstaining), garbage
// votes are dropped, and everything is logged and counted in [Stats]. A dead
// or hung plugin is killed and started again on the next use, with capped
// exponential backoff when it keeps failing. A call that misses its
// deadline once is slowness (a loaded machine, a large ballot), not a hang:
// the process is kept, so that the next round does not pay for a restart
// too; the second timeout in a row kills it.
//
// A plugin that reports suspects (sdk.SuspectReporter: a site whose origin
// it saw failing between rounds) gets a stream from each of its processes;
// each suspect goes to [Spec.OnSuspect], bounded: only sites of this
// source's ballots, names of at most sdk.MaxSuspectName bytes, at most
// [MaxSuspectsPerSecond]. The rest is dropped and counted.
//
// Debug mode: when VIGIL_REATTACH_PLUGINS (sdk/host.ReattachEnv) names a
// source, or its plugin binary's base name, the Source attaches to that
// process, a plugin started by hand in debug mode (sdk.WithDebug), instead
// of starting the binary. It logs so, never kills that process (a restart
// attaches again; Close only closes the connection), and its PID is the
// attached process's.
//
// No plugin process outlives the host: on Linux the host asks the kernel to
// SIGKILL the plugin when the host dies, and plugins built with sdk.Serve
// also exit when their parent goes away.
//
// The package knows nothing of the configuration loader: it takes a plain
// [Spec].
package pluginhost
