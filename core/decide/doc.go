// Package decide is vigil's decision core: origin health with thresholds,
// level health, switching (automatic and manual failback, the failover
// search, the all-unhealthy alert, failback notices, the manual hold) and the
// operator actions, exactly as docs/decisions.md states them.
//
// It is pure: given a site's stored state and a round's verdicts it updates
// the state and returns the events. It touches no clock, network or disk,
// and a steady-state round allocates nothing (callers pass the buffers).
package decide
