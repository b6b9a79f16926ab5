package api

import (
	"context"
	"net/http"
	"time"
)

// SiteHistory is GET /v1/sites/{site}/history: each origin's recent
// verdicts and its uptimes, from the agent's history file
// (data_dir/history.ring). Kept is false, with Note saying why, where the
// agent keeps no history (an etcd store) or the file could not be made.
type SiteHistory struct {
	Site string `json:"site"`
	Kept bool   `json:"kept"`
	Note string `json:"note,omitempty"`
	// Rounds is how many of an origin's last verdicts Recent holds at
	// most (the status page's strip); the agent keeps more (KeptRounds).
	Rounds int `json:"rounds"`
	// Origins by name: every configured origin, with an empty Recent
	// before its first recorded round.
	Origins map[string]OriginHistory `json:"origins"`
}

// OriginHistory is one origin's history.
type OriginHistory struct {
	// Recent are its last verdicts, oldest first (at most Rounds).
	Recent []HistoryPoint `json:"recent"`
	// KeptRounds is how many of its rounds the agent keeps (by default
	// those of the last 24 hours), and KeptSince the time of the oldest:
	// what vigil history export and a replay get. Cut says the origin
	// changed more often than the agent's runs of rounds alike hold
	// (docs/history.md): it keeps less than the agent's keep.
	KeptRounds int        `json:"kept_rounds,omitempty"`
	KeptSince  *time.Time `json:"kept_since,omitempty"`
	Cut        bool       `json:"cut,omitempty"`
	// Uptime1h, Uptime24h and Uptime7d are the per cent of up verdicts
	// among the judged rounds of the last hour, day and week (to 10
	// minutes, 1 hour and 6 hours); null when no round was judged then.
	// A round no source settled counts as neither up nor down.
	Uptime1h  *float64 `json:"uptime_1h"`
	Uptime24h *float64 `json:"uptime_24h"`
	Uptime7d  *float64 `json:"uptime_7d"`
	// Judged1h, Judged24h and Judged7d count the up and down verdicts of
	// each window.
	Judged1h  int `json:"judged_1h"`
	Judged24h int `json:"judged_24h"`
	Judged7d  int `json:"judged_7d"`
	// DataSince is when the origin's kept data begins (to the round while
	// its recent verdicts reach back to its first, else to 10 minutes, 1
	// hour or 6 hours); nil before its first round. An uptime over a
	// window longer than the time since covers only that: the status
	// page says "31 min of data" rather than three equal uptimes.
	DataSince *time.Time `json:"data_since,omitempty"`
	// Damaged is set when the origin's record failed its checksum: it is
	// shown empty and starts again with the next round.
	Damaged bool `json:"damaged,omitempty"`
}

// HistoryPoint is one recorded round of an origin.
type HistoryPoint struct {
	// Time is when the round started, to the millisecond.
	Time time.Time `json:"time"`
	// Verdict is up, down or none.
	Verdict string `json:"verdict"`
	// State is the origin's state after the round: healthy, unhealthy,
	// unknown or disabled.
	State string `json:"state"`
	// LatencyMS is the mean latency of the votes that made the verdict
	// (0.1 ms steps, at most 6553.5).
	LatencyMS float64 `json:"latency_ms"`
}

// FleetSummary is GET /v1/summary: the fleet in a few numbers, for the
// status page's summary bar and the first line of vigil status.
type FleetSummary struct {
	Round uint64 `json:"round"`
	Sites int    `json:"sites"`
	// Counts are the sites by status, every status present.
	Counts map[string]int `json:"counts"`
	// OffTopLevel counts the sites on a level other than their top one.
	OffTopLevel int `json:"off_top_level"`
	// AllUnhealthy counts the sites whose every level is unhealthy.
	AllUnhealthy int `json:"all_unhealthy"`
	// FailbackWaiting counts the sites off their top level whose top
	// level is healthy again and whose failback is manual (configured, or
	// a manual hold): an operator's switch back is awaited.
	FailbackWaiting int `json:"failback_waiting"`
	// CycleSeconds is how long the scheduler takes to probe every site
	// it may probe once: ceil(those sites / sites_per_round) rounds of
	// round_interval, one round at least. Above round_interval, the
	// sites exceed sites_per_round and a failure takes about this times
	// unhealthy_threshold to be seen. 0 from an agent that does not say.
	CycleSeconds float64 `json:"cycle_seconds,omitempty"`
	// RoundSitesAuto is set when sites_per_round is "auto": CycleSeconds
	// then counts with RoundSites, the size of the last round (the
	// engine sizes each round from the last rounds' time).
	RoundSitesAuto bool `json:"round_sites_auto,omitempty"`
	// RoundSites is the size of the last round under "auto" (0 before
	// the first round, or without "auto").
	RoundSites int `json:"round_sites,omitempty"`
}

// History reads a site's history.
func (c *Client) History(ctx context.Context, site string) (*SiteHistory, error) {
	var h SiteHistory
	if err := c.Do(ctx, http.MethodGet, sitePath(site)+"/history", nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Summary reads the fleet's summary.
func (c *Client) Summary(ctx context.Context) (*FleetSummary, error) {
	var s FleetSummary
	if err := c.Do(ctx, http.MethodGet, "/v1/summary", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
