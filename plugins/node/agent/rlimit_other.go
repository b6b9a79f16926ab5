//go:build !unix

package agent

func openFileLimit() int { return 0 }
