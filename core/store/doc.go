// Package store keeps vigil's state across restarts behind a small
// interface: every site's decision state, the probe order, the round and
// publication counters, a bounded event journal and each notifier's
// delivery cursor. A round's changes are committed in one atomic write.
//
// Open gives the embedded default, a bbolt file in the data directory; a
// distributed store (etcd) implements the same Store interface.
package store
