// Package engine is `vigil agent`'s heart: it drives the fleet round after
// round (never overlapping), asks the vote-source plugins, commits each
// round's state and events atomically to the store, publishes the new
// publication, tells its observers (Observer: the notifiers, the history
// feed) of each durable commit, applies operator actions between rounds,
// reloads the configuration and swaps in an immutable snapshot of every
// site after each commit (Views), from which the API's read model
// (core/readmodel) builds its answers.
// Between rounds it runs the confirmation rounds of sites in doubt
// (health_check { confirm_interval }, confirm.go), and Suspect takes the
// plugins' passive reports that ask for one.
//
// The decisions themselves are the fleet's (and so the same as
// `vigil simulate`); the engine only does the I/O around them.
package engine
