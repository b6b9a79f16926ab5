//go:build race

package main

// raceEnabled: the test binary runs with the race detector, so the
// end-to-end tests build the real binaries with it too.
const raceEnabled = true
