// Package store keeps vigil's state across restarts behind a small
// interface: every site's decision state, the probe order, the round and
// publication counters, a bounded event journal and each notifier's
// delivery cursor. A round's changes are committed in one atomic write.
//
// Open gives the embedded default, a bbolt file in the data directory; a
// distributed store (etcd) implements the same Store interface.
//
// With OpenOptions.Reserve the bbolt store keeps a space reserve beside
// its file (reserve.go): a write that fails because the filesystem is
// full deletes the reserve and runs again, so that rounds and failovers
// go on being saved, and published, after the disk fills.
package store
