// Package storetest is the behaviour every store.Store must have, as one
// test that each implementation (bbolt, etcd) runs against itself.
package storetest
