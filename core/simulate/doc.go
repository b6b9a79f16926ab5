// Package simulate is `vigil simulate`: it replays a scripted timeline
// (docs/simulate.md) through the real scheduler, vote chain and
// decision core, with the votes taken from the timeline instead of plugins,
// and writes what happened as JSON lines. A timeline's "confirm" lines are
// confirmation ticks (fast confirmation): they probe only the sites in
// doubt and take no round time. With control { partition }, the
// path-partition rule (core/partition) runs after every round and tick,
// its voter labels written on the timeline's votes ("down@pop=eu").
package simulate
