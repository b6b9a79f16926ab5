// Package benchproc runs a benchmark's own server in a process of its own,
// as the peers it is compared with (HAProxy, nginx, NSD, Knot) run,
// measures the CPU time a process and its children spend, and takes the
// medians and ratios such comparisons report. It is for benchmarks only.
//
// The server process is the test binary again, running one Test function
// that calls Announce once it listens: the benchmark calls Start, which
// reads the announced address, and stops the process (its stdin closed,
// waited for) when the benchmark ends.
package benchproc
