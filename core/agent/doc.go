// Package agent assembles the control plane that `vigil agent` runs from a
// configuration: the state store (bbolt in data_dir, or etcd with the
// cluster around it), the engine and its vote sources, the notifiers, the
// DNS publisher, and the HTTP API with the status page and metrics.
//
// It has one lifecycle: Start builds and starts everything, Reload applies
// a new configuration (every setting it can, atomically where it can, and
// says which settings need a restart), and Stop ends it all. The command
// only parses flags and signals.
package agent
