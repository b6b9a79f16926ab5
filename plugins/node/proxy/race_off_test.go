//go:build !race

package proxy

// raceEnabled: the race detector also shuffles the scheduler's run queues.
const raceEnabled = false
