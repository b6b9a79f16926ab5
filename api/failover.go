package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// FailoverReportList is the answer of GET /v1/sites/{site}/failovers: the
// site's failovers (real ones and drills), newest first, each with the
// time it took from the first failed verdict to the edges (see
// docs/failover-time.md, "Time to failover, measured").
type FailoverReportList struct {
	// Site is the site asked for.
	Site string `json:"site"`
	// Failovers are the reports, newest first; empty when the site has
	// not failed over since the journal began (or since this agent
	// started, for reports still waiting for their nodes).
	Failovers []FailoverReport `json:"failovers"`
}

// FailoverReport is the time one failover took, step by step. Times are
// RFC 3339 with milliseconds; durations are in seconds. A time or a
// duration that could not be measured is left out (null in JSON).
//
// The steps, in order:
//
//	FirstFailure  the first round that counted a failure for the origin
//	              whose failure made FromLevel unhealthy (Origin)
//	Decided       the round's decision to switch (RoundStarted is the
//	              start of that round: the time the journal gives the
//	              level_switched event)
//	Committed     the switch saved in the state store
//	Published     the publication version carrying the switch
//	              (Publication) handed to the nodes
//	Nodes[].Applied  each node's edge applying that version (its clock)
type FailoverReport struct {
	// Site is the site's name; FromLevel the level it left, ToLevel the
	// level it went to.
	Site      string `json:"site"`
	FromLevel int    `json:"from_level"`
	ToLevel   int    `json:"to_level"`
	// Drill is true for a failover a drill caused (`vigil drill`).
	Drill bool `json:"drill"`
	// Seq is the journal sequence number of the switch's level_switched
	// event, and Round its round.
	Seq   uint64 `json:"seq"`
	Round uint64 `json:"round"`
	// Complete is true once every node expected has reported, or the
	// wait for their reports ended (FailoverReportWait after the
	// publication): the report is then journaled as a failover_timed
	// event and does not change any more.
	Complete bool `json:"complete"`
	// Origin is the origin whose failure made FromLevel unhealthy (of
	// those that turned unhealthy in the deciding round, the one that
	// failed first); empty when none did (an origin disabled, say).
	Origin string `json:"origin,omitempty"`

	FirstFailure *ReportTime `json:"first_failure,omitempty"`
	RoundStarted ReportTime  `json:"round_started"`
	Decided      ReportTime  `json:"decided"`
	Committed    *ReportTime `json:"committed,omitempty"`
	Published    *ReportTime `json:"published,omitempty"`
	// Publication is the publication version that carries the switch.
	Publication uint64 `json:"publication,omitempty"`

	// DetectSeconds is FirstFailure to Decided.
	DetectSeconds *float64 `json:"detect_seconds,omitempty"`
	// CommitSeconds is Decided to Committed.
	CommitSeconds *float64 `json:"commit_seconds,omitempty"`
	// PublishSeconds is Decided to Published.
	PublishSeconds *float64 `json:"publish_seconds,omitempty"`
	// EdgeSeconds is Published to the last node's apply, of the nodes
	// that reported one.
	EdgeSeconds *float64 `json:"edge_seconds,omitempty"`
	// TotalSeconds is FirstFailure to the last node's apply.
	TotalSeconds *float64 `json:"total_seconds,omitempty"`

	// Nodes has one row per node known to this agent (a node that
	// reported applying any publication), sorted by name.
	Nodes []FailoverNode `json:"nodes"`
}

// FailoverNode is one node's part of a failover.
type FailoverNode struct {
	// Node is the node's id (vigil-node -id).
	Node string `json:"node"`
	// Reported is false when the node said nothing of this failover's
	// publication before the report was complete: an older vigil-node,
	// or one that did not get the publication. The other fields are then
	// empty; text output says "not reported".
	Reported bool `json:"reported"`
	// Version is the publication version the node applied (Publication
	// or a later one that still carried the switch).
	Version uint64 `json:"version,omitempty"`
	// Applied is when the node's edge (its proxy, or every edge it
	// drives) applied it, by the node's clock.
	Applied *ReportTime `json:"applied,omitempty"`
	// EdgeSeconds is the report's Published to Applied.
	EdgeSeconds *float64 `json:"edge_seconds,omitempty"`
	// Result is "ok", or the edge's error text when it refused the
	// publication (the node keeps retrying).
	Result string `json:"result,omitempty"`
	// Proxying is true when the node runs its own proxy: only then are
	// LastRequest and the visitor counts known.
	Proxying bool `json:"proxying,omitempty"`
	// LastRequest is the last time the node's proxy sent a request to an
	// origin of FromLevel (null: none was sent while the node knew the
	// origin). LastRequestSeconds is FirstFailure to LastRequest: the
	// time to failover as a visitor lives it.
	LastRequest        *ReportTime `json:"last_request,omitempty"`
	LastRequestSeconds *float64    `json:"last_request_seconds,omitempty"`
	// VisitorRequests and VisitorErrors are the real requests to
	// FromLevel's origins in the node's passive windows when it applied
	// the switch, and those of them that failed (the visitors' errors in
	// the meantime, at most one window's worth per origin).
	VisitorRequests int `json:"visitor_requests"`
	VisitorErrors   int `json:"visitor_errors"`
}

// FailoverReportWait is how long the control plane waits, after the
// publication, for every known node's report before a failover's report
// is complete without the missing ones.
const FailoverReportWait = 60 * time.Second

// ReportTime is a time written as RFC 3339 with milliseconds, in UTC
// ("2026-12-02T07:15:04.123Z").
type ReportTime struct{ time.Time }

// ReportTimeLayout is the layout of a ReportTime.
const ReportTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// NewReportTime returns t as a *ReportTime, nil for the zero time.
func NewReportTime(t time.Time) *ReportTime {
	if t.IsZero() {
		return nil
	}
	return &ReportTime{t.UTC()}
}

// MarshalJSON writes the time as a JSON string in ReportTimeLayout.
func (t ReportTime) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(t.UTC().Format(ReportTimeLayout))), nil
}

// UnmarshalJSON reads any RFC 3339 time.
func (t *ReportTime) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("report time %s is not a JSON string", b)
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("report time %q: %w", s, err)
	}
	t.Time = v
	return nil
}

// String writes the time in ReportTimeLayout.
func (t ReportTime) String() string { return t.UTC().Format(ReportTimeLayout) }

// Failovers reads the site's failover reports, newest first, at most
// limit of them (0: the agent's default).
func (c *Client) Failovers(ctx context.Context, site string, limit int) (*FailoverReportList, error) {
	path := "/v1/sites/" + url.PathEscape(site) + "/failovers"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var out FailoverReportList
	if err := c.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// line is the report's one-line form, as `vigil events` prints a
// failover_timed event.
func (r *FailoverReport) line() string {
	if r == nil {
		return "failover timed (no report)"
	}
	reported := 0
	for _, n := range r.Nodes {
		if n.Reported {
			reported++
		}
	}
	return fmt.Sprintf("failover %d -> %d timed: detect %s, publish %s, edges %s (%d of %d nodes reported)",
		r.FromLevel, r.ToLevel, secondsText(r.DetectSeconds), secondsText(r.PublishSeconds), secondsText(r.EdgeSeconds), reported, len(r.Nodes))
}

func secondsText(s *float64) string {
	if s == nil {
		return "unknown"
	}
	return fmt.Sprintf("%.3fs", *s)
}
