// Package partition is the path-partition rule of docs/partition.md,
// pure: after a probed round of a site, each origin's votes are put in
// groups (one per source and value of the configured voter label); a
// group whose every vote is down while a vote outside it is up is "alone",
// and alone for the configured number of probed rounds in a row is a
// suspected path partition, announced by a path_partition_suspected event
// at its start and at its end.
//
// It touches no clock, network or disk: the round's time comes in as a
// value and the detector's memory (the streaks) is a Memory the caller
// keeps. The engine runs it after every round with the voters' labels
// its sources report; `vigil simulate` runs it with the labels written in
// the timeline, so both say the same thing. The agent's history keeps,
// for each round, the groups whose every vote was down (Tally.DownGroups)
// beside each source's up votes, and the what-if replay (`vigil simulate
// -history`) rebuilds the round's tally from them (Tally.AddUps): the
// rule needs nothing more of a round. Nothing here changes a verdict, a
// state or a level.
package partition
