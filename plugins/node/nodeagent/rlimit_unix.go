//go:build unix

package nodeagent

import "syscall"

// openFileLimit is the process's open-file limit (Go raises the soft limit
// to the hard one at start), or 0 when unknown.
func openFileLimit() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur > 1<<30 {
		return 0
	}
	return int(l.Cur)
}
