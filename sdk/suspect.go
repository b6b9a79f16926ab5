package sdk

import (
	"context"
	"errors"
)

// SuspectReporter is an optional interface a VoteSource may also implement
// when it learns between rounds that a site's origin is failing: the node
// gateway does, when the real traffic a node's proxy sends to an origin
// starts failing. Each [Suspect] it reports asks vigil to confirm that site
// now, with a round of its own, rather than at the site's next scheduled
// round. A suspect is a hint, never a vote: the confirming round's votes,
// from every source of the chain, decide.
//
// vigil calls Suspects once the plugin is configured, and again after each
// restart of the process or when the stream to it broke. ctx ends when
// vigil stops listening (the plugin stops, or the stream broke): from then
// on the plugin must not send on the channel any more. Send with a select
// on ctx.Done(), or without blocking (drop the suspect when the channel is
// full: the next round judges the site anyway):
//
//	func (s *mySource) Suspects(ctx context.Context) <-chan sdk.Suspect {
//		ch := make(chan sdk.Suspect, 16)
//		s.addWatcher(ctx, ch) // removed, and never sent to again, once ctx is done
//		return ch
//	}
//
// Closing the channel ends the stream; vigil asks again later, after a
// backoff. Suspects may be called while another call (even another
// Suspects, for a moment) runs: it must be safe for concurrent use.
//
// Report few, meaningful suspects: vigil passes on only sites it handed
// this source in a ballot, at most a few per second, and the engine
// confirms a site at most once per its confirm_interval. A host older than
// SDK v0.2.0 never calls Suspects, and the plugin works as before.
type SuspectReporter interface {
	Suspects(ctx context.Context) <-chan Suspect
}

// Suspect names a site whose origin a plugin saw failing between rounds.
type Suspect struct {
	// Site is the site's name, as a Target of a ballot gave it. vigil
	// ignores a name it never handed this source, and one longer than
	// [MaxSuspectName] bytes.
	Site string
	// Origin, optional, is the origin's name within the site (Target.Origin).
	Origin string
	// Detail, optional, says why, for vigil's log: "9 of 12 requests
	// failed on node edge-3". vigil keeps at most MaxSuspectName bytes of
	// it. Keep it free of secrets.
	Detail string
}

// MaxSuspectName is the longest Suspect.Site and Suspect.Origin vigil
// accepts, and the most of Suspect.Detail it keeps, in bytes.
const MaxSuspectName = 256

// ErrNoSuspects is returned by a host-side client (package sdk/host) whose
// plugin does not implement SuspectReporter (or predates it).
var ErrNoSuspects = errors.New("the plugin reports no suspects")
