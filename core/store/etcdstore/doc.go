// Package etcdstore keeps vigil's state in etcd behind the store.Store
// interface, so that several agents can share it: every site's decision
// state, the round and publication counters, the event journal and the
// notifiers' delivery cursors.
//
// Keys, under the configured prefix P:
//
//	P/meta            the counters (JSON store.Meta)
//	P/sites/NAME      one site (JSON store.Site)
//	P/events/SEQ      one journal event, SEQ zero-padded to 20 digits
//	P/cursors/NAME    a notifier's delivery cursor (decimal)
//	P/probed/NAME     a site's probe mark (round and time)
//	P/staging/ID      the head of a split commit's staged set (its start time)
//	P/staged/ID/...   the staged set: sites/NAME, probed/NAME, events/INDEX
//	P/applying/ID     the commit marker of a split commit ("BASE N")
//	P/compact         the turn to compact etcd's history (Compactor)
//
// Every write is a transaction guarded by a Fence: the comparisons that
// prove this instance still holds the etcd lease entitling it to write
// (the leader key in active/standby mode, the site's owner key in sharded
// mode). When the guard fails, Commit and SetCursor return an error
// wrapping ErrFenced and write nothing of that transaction, so a deposed
// instance can never change the state.
//
// The journal's sequence numbers are allocated by the store under a
// compare-and-swap of P/meta: concurrent writers (sharded mode) never
// reuse a number and the journal has no gaps.
//
// # Split commits
//
// etcd refuses a transaction of more than --max-txn-ops operations (128
// by default; comparisons count apart, with the same bound), and a
// request of more than --max-request-bytes (1.5 MiB by default; the store
// keeps each transaction under 1 MiB). A commit that fits is one
// transaction. One that does not writes its probe marks first, straight
// to P/probed/ in guarded chunks: they are the scheduler's memory only
// (which round last probed a site, as Load's LastProbed), so they may run
// ahead of a round that is not committed, as they always could; the rest
// is then one transaction if it fits, or split as follows. A larger one (the first save of a large
// fleet, or an incident round in which hundreds of sites fail over) is
// split, and stays atomic as readers see it:
//
//  1. Staging: every write (site records, deletions as empty values,
//     and events by their index in the batch) is put under
//     P/staged/ID/ in chunks of at most max_txn_ops, each chunk guarded by
//     the fence (the writer's comparisons, and each site's in sharded
//     mode) and by the head key P/staging/ID that the first chunk
//     creates. Nothing reads these keys yet.
//  2. The marker: one small transaction, guarded by the fence, the head
//     and a compare-and-swap of P/meta, puts the new counters (which
//     allocate the events' sequence numbers BASE+1 ... BASE+N) and
//     P/applying/ID = "BASE N", and prunes the journal. This is the
//     commit point: before it no reader sees anything of the batch, from
//     it every reader sees all of it.
//  3. The copy: the staged writes are put to their keys in chunks, each
//     key only if its mod revision is older than the marker's (nothing
//     wrote it since) and only while no newer marker exists; then the
//     marker, the head and the staged set are deleted in one transaction.
//
// Readers (Load, Events) read in one etcd revision the keys and, for every
// marker under P/applying/, its staged set: a staged record wins over its
// key unless the key's mod revision is at or after the marker's revision
// (then a later commit wrote it); of two markers the newer wins. Events
// of a marker come from its staged set until copied. So a reader sees the
// batch whole from the marker on, whichever part of the copy is done.
//
// A writer that dies (or is fenced) before the marker leaves a staged set
// nobody reads; the engine keeps the round pending and commits it again
// under a new ID, and a set older than max(2 minutes, 4 x the timeout)
// without a marker is deleted by the next split commit (sweep). A writer
// that dies after the marker leaves a committed set that readers already
// see whole; the next writer's Load notices it and its next Commit copies
// it (newest marker first) before anything else, so that a deletion never
// lands under a staged record. The copy is idempotent, and any instance
// may run it. Standbys follow P/meta, which only the marker (or a one-
// transaction commit) writes, so they reload once per commit and find it
// whole.
//
// # Partial reads
//
// A shard reads less than Load does. LoadSince reads the site records
// written after a revision (another shard's commit costs it what that
// commit wrote), and LoadSites the records of named sites only, at one
// revision, max_txn_ops reads a transaction (the sites a shard just
// claimed or hands over): neither reads the whole store, and both apply
// the staged records of committed split commits as Load does.
//
// # Compaction
//
// etcd keeps every revision until compacted. A Compactor compacts it,
// one instance of the cluster an interval (a compare-and-swap on
// P/compact), to the revision seen one interval before. No read of the
// store needs an older revision: Load and LoadSince read the current
// one (LoadSince filters by mod revision, it does not read history),
// and the reads pinned at the revision of their first read (Events'
// pages, staged sets, LoadSites) start again from the current revision
// if etcd answers ErrCompacted.
//
// max_txn_ops cannot exceed what etcd takes: ProbeLimit asks etcd once
// (etcd does not report its --max-txn-ops) with read-only transactions of
// comparisons, and a commit etcd refuses for its size probes and retries.
package etcdstore
