// Package tcpcheck is an example third-party vigil vote source, and a
// narrow check: an origin is Down when a TCP connection to it is refused
// or does not open within the target's timeout. An open port is no proof
// of a good HTTP answer, so the source abstains there and never votes Up:
// the sources after it decide.
// Copy this folder to start your own plugin; see README.md.
package tcpcheck
