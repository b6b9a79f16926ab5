// Package readmodel is the HTTP API's read model: it builds what the API
// shows of the fleet (api.SiteView, a site's one-word status, the fleet
// summary, the nodes' status, the wire form of events) from a commit's
// snapshot.
//
// The engine (core/engine) runs rounds and orders commits; after each
// commit it swaps in an immutable snapshot of every site, its Views,
// which satisfies Snapshot. The read model asks that snapshot for plain
// data in its own terms (SiteState, cheap enough for a pass over the
// whole fleet; Site, Origin and Vote for one view; SourceReport for the
// sources' own status), never for an engine type, and shapes it for the
// wire. Readers never wait for a round, and the engine knows nothing of
// the API's view shapes.
//
// Events cross from the decision core's type (decide.Event) to the API's
// (api.Event) here, in Event and Events: package api imports nothing from
// core/.
package readmodel
