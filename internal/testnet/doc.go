// Package testnet gives tests loopback addresses for servers they cannot
// hand a listener to: a subprocess whose configuration names its port, or
// a server that must be restarted on the same address.
//
// The usual helper (listen on :0, note the port, close) races: between the
// close and the test's own bind, the kernel may give the port to any other
// socket bound to :0, in this process or another test binary running
// beside it. Addr avoids both ways of losing the port:
//
//   - it picks ports below the kernel's ephemeral range
//     (/proc/sys/net/ipv4/ip_local_port_range), which the kernel never
//     hands out for :0, so no kernel-chosen port can take it;
//   - it holds an exclusive lock file for the port (in the temp folder,
//     shared by every test process of this repository) until the test
//     ends, so no other test that uses Addr takes it meanwhile.
//
// A test that can pass a listener (httptest, an in-process server) should
// still listen on :0 and pass it.
package testnet
