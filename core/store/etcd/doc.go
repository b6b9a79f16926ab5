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
package etcdstore
