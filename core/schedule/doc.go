// Package schedule chooses which sites a round probes: up to sites_per_round
// eligible sites, those probed longest ago first (never probed first of
// all), ties by site name. A site is eligible when its health check is
// enabled and it has at least two enabled origins.
package schedule
