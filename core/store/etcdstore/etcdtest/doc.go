// Package etcdtest starts a real etcd server (Debian's etcd-server,
// /usr/bin/etcd) on loopback ports for tests. When the binary is absent
// the test is skipped with a message, unless CI is set, where it fails:
// CI installs it (.ci/run).
package etcdtest
