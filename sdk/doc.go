// Package sdk is everything a vigil vote-source plugin author imports.
//
// A vote source is a separate program that vigil starts and talks to over
// gRPC (hashicorp/go-plugin). Once per round, vigil hands each source the
// origins still unsettled by the sources before it, in one batched [Ballot];
// the source answers with [Vote]s. A plugin's whole main is one call:
//
//	func main() {
//		sdk.Serve(func(log sdk.Logger) sdk.VoteSource {
//			return &mySource{log: log}
//		})
//	}
//
// The life of a plugin process:
//
//  1. vigil starts the binary named by a source block's `plugin` attribute.
//     The process gets only the environment variables the operator listed in
//     `env`, and it exits by itself when vigil goes away.
//  2. [BasePlugin.Info] names the plugin and its version, and declares its
//     capabilities: the target settings it honours (see [CapabilityCABundle]
//     and the others). vigil hands the plugin no target that needs a
//     capability it did not declare; it abstains for it instead.
//  3. [BasePlugin.ConfigSchema] declares the attributes of the source's
//     `config { }` block. vigil decodes the operator's block against that
//     schema, so type errors are reported at file:line:col without any code in
//     the plugin.
//  4. [BasePlugin.Configure] receives the decoded values. Return
//     [Diagnostics] naming the attribute at fault and vigil shows each one at
//     the attribute's file:line.
//  5. [VoteSource.Vote] is called once per round, with a deadline on its
//     context: the source's `timeout`, or, when the operator sets none, the
//     source's equal share of what round_interval leaves the chain (the
//     interval less min(interval/10, 2s), less the timeouts that are set):
//     28s for a chain of one source at the default round_interval of 30s,
//     14s each for two. Answer before ctx.Deadline().
//
// Two interfaces are optional: [StatusReporter] shows operators what the
// source is made of (its nodes, its checkpoints), and [SuspectReporter]
// asks vigil, between rounds, to confirm a site early when the plugin saw
// one of its origins fail.
//
// Narrow checks: a source that checks less than vigil's health check asks
// (a TCP connect, a DNS lookup) votes Down on what it sees fail and
// abstains on the rest. It must not vote Up for what it did not check: an
// Up settles the origin, and the sources after it, which would have seen
// an HTTP 503, are never asked. examples/tcpcheck is such a source.
//
// Errors: an error returned by Vote is that round's error for the source.
// vigil drops the source's votes for the round and shows the error's text
// to operators (in the log, in `vigil probe`, in `vigil status` and on the
// status page), and asks the same process again next round. Write it for
// an operator: "quota exhausted until 14:00 UTC", not "error 429". A plain
// error travels as gRPC status UNKNOWN; an error carrying a gRPC status
// (GRPCStatus() method) keeps its code, shown next to the message.
//
// If the plugin crashes, hangs past the deadline, breaks the connection or
// answers gRPC status UNAVAILABLE, vigil drops that source's votes for the
// round, logs and counts a crash, and restarts the plugin with capped
// backoff before its next use. Return UNAVAILABLE only to ask for that
// restart. Garbage votes are dropped one by one, the valid ones kept.
// sdk/PROTOCOL.md (section 4) has the full table.
//
// Logging: write through the [Logger] handed to the factory. It writes
// JSON lines on stderr and vigil re-emits them in its own log under the
// source's name, at their level. Plain text on stderr and what the plugin
// prints once served is logged at INFO. vigil keeps at most 200 lines a
// second of a plugin, and the first 2048 bytes of a vote's Detail (see
// sdk/PROTOCOL.md, section 6). Do not write to stdout before Serve:
// go-plugin uses it for the handshake. [NopLogger] discards everything,
// for a VoteSource built outside Serve.
//
// Run by hand, a plugin binary answers -version and -schema (see [Serve]).
//
// This package, sdk/probe and sdk/sdktest are all a plugin imports. Package
// sdk/host is the host's side of the protocol (vigil uses it); plugin
// authors never need it. The wire protocol, for plugins in other languages,
// is sdk/proto/votesource/v1/votesource.proto and sdk/PROTOCOL.md, which
// also states the compatibility promise: a plugin serves one protocol
// version ([ProtocolVersion]) and an agent speaks the newest and the one
// before it.
//
// Testing: package sdk/sdktest runs a plugin in-process over real gRPC and as
// a real subprocess. Package sdk/probe is the HTTP probe that the shipped
// direct source and node agents use; it is free to use in your own plugin.
package sdk
