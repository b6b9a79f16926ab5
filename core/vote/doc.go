// Package vote is the vote-source chain: the tally rule that turns one
// source's votes (or all votes so far, for a "carry" source) into a verdict,
// and the Walker that hands each round's unsettled origins to the sources in
// declaration order.
//
// The contract, from docs/decisions.md ("The chain of vote sources" and
// "The rule of one source"): for source S, the origins still
// unsettled are handed to S; an origin settled by an earlier source is never
// handed to a later one. A verdict needs at least MinVotes votes and a strict
// majority. An origin still unsettled after the last source gets VerdictNone.
// A source that fails counts as having returned no votes.
//
// The package does no I/O of its own: sources are reached through the Source
// interface, which the daemon implements with plugins and `vigil simulate`
// with a timeline.
package vote
