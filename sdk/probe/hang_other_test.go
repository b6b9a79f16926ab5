//go:build !linux

package probe

import "testing"

// hangingListener needs Linux's accept queue behaviour.
func hangingListener(t *testing.T) string {
	t.Skip("a connect that hangs on loopback needs Linux")
	return ""
}
