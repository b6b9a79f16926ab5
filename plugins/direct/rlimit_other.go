//go:build !unix

package direct

func openFileLimit() int { return 0 }
