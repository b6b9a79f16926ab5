// Package fakecp is a stand-in control plane for tests and benchmarks: it
// serves the publication contract of sdk/publication (GET
// /v1/publication?after=V&wait=D answers 200 with a newer snapshot at once
// or as soon as one is published, or 304 when the wait ends) on loopback.
package fakecp
