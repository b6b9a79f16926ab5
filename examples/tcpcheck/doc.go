// Package tcpcheck is an example third-party vigil vote source: an origin
// is Up when a TCP connection to it opens within the target's timeout.
// Copy this folder to start your own plugin; see README.md.
package tcpcheck
