package probe

import (
	"net"
	"testing"
)

// useResolver makes probes look names up with r until the test ends. Tests
// that call it must not run in parallel with other probes.
func useResolver(t *testing.T, r *net.Resolver) {
	t.Helper()
	old := dialer
	d := *dialer
	d.Resolver = r
	dialer = &d
	t.Cleanup(func() { dialer = old })
}
