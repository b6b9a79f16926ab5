// Package history keeps each origin's recent verdicts and its up/down
// counts in one fixed-size ring file in data_dir (history.ring), outside
// the heap: what the status page draws as a history strip, uptime
// percentages and a latency sparkline.
//
// The file is a header page, an index (one 8-byte key per slot: a hash of
// the site and origin names) and one fixed-size record per slot. A record
// holds its key, a CRC-32C of itself, its last verdicts (time, latency,
// verdict, settling source, the origin's state after the round)
// and three tiers of up/down counters: 6 x 10 minutes, 24 x 1 hour and
// 28 x 6 hours, from which the 1 h, 24 h and 7 d uptimes come. The size is
// fixed when the file is made; docs/history.md gives the format, the bytes
// per origin and the file size at 1k, 10k and 100k sites.
//
// Nothing here may stop the agent: a file whose header, size or index is
// damaged is made again empty (Open reports why), a record whose CRC fails
// is reset when it is next read or written, and a failed write is an
// error for the caller to log and count, never a reason to stop a round.
// The file is read and written with pread/pwrite (never mapped), so a cut
// or damaged file cannot crash the process and its pages stay out of the
// agent's resident memory.
//
// Each round entry also keeps per-source vote tallies (VoteSlots of them:
// each source the round asked, its up, down and abstain votes), for a
// replay of recorded rounds through another chain (vigil simulate
// -history). A file of version 1 kept none: an agent starts it again
// empty, and ReadSnapshot still reads it.
//
// From version 3 each round entry also keeps, when the path-partition
// rule ran (control { partition }), the rule's groups whose every vote
// was down in a round with an up vote (GroupSlots of them, by number; the
// names in a table after the header): with the tallies, what the rule
// needs to run again in a replay. A file of version 2 kept none: an agent
// starts it again empty, and ReadSnapshot still reads it.
//
// From version 4 each round entry also keeps the milliseconds of the
// round's time (2 bytes), so that rounds less than a second apart replay
// as as many rounds. A file of version 3 kept whole seconds: an agent
// starts it again empty, and ReadSnapshot still reads it (its points at
// whole seconds).
//
// From version 5 a record keeps runs instead of round entries: RunSlots
// runs of rounds alike (last round's number, step in rounds, count,
// verdict, source, state, tallies, groups; a new run at any change but of
// abstentions, and at a change of step), the latencies of the last RecentRounds rounds,
// and the counters; the file keeps the times of its last Rounds rounds
// once (the round table), from which a run's rounds get back their exact
// times, and which bounds the age of what is kept (runs.go). A file of
// version 4 is started again empty; ReadSnapshot still reads it.
package history
