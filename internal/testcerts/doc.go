// Package testcerts makes certificate authorities and certificates for
// tests: a CA, server and client certificates it signs for given names and
// validity, written as PEM files. It is for tests only: the keys are
// ECDSA P-256 made at each call and never leave the test's folder.
package testcerts
