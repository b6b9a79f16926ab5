//go:build !unix

package nodeagent

func openFileLimit() int { return 0 }
