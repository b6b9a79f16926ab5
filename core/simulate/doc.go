// Package simulate is `vigil simulate`: it replays a scripted timeline
// (docs/simulate.md) through the real scheduler, vote chain and
// decision core, with the votes taken from the timeline instead of plugins,
// and writes what happened as JSON lines. A timeline's "confirm" lines are
// confirmation ticks (fast confirmation): they probe only the sites in
// doubt and take no round time. With control { partition }, the
// path-partition rule (core/partition) runs after every round and tick,
// its voter labels written on the timeline's votes ("down@pop=eu").
//
// Replay is `vigil simulate -history` (docs/replay.md): an agent's
// recorded history (an Export of its history file) through the same code
// under another configuration, the recorded votes through its chain and
// the recorded down groups through the partition rule, beside the
// recorded switches and path_partition_suspected events.
package simulate
