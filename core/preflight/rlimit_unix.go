//go:build unix

package preflight

import "syscall"

// OpenFileLimit is the process's soft open-file limit (RLIMIT_NOFILE),
// which the plugins it starts inherit; 0 when unknown or unlimited.
func OpenFileLimit() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur > 1<<30 {
		return 0
	}
	return int(l.Cur)
}
