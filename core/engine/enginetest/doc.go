// Package enginetest builds engines for tests: an in-process vote source
// whose answers the test sets, and a helper that starts an engine on a
// throwaway bbolt store.
package enginetest
