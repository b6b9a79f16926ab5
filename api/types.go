package api

import (
	"time"
)

// SiteView is one site as GET /v1/sites/{site} shows it.
type SiteView struct {
	// Round is the site's last probed round; 0 before the first.
	Round    uint64 `json:"round"`
	Site     string `json:"site"`
	Hostname string `json:"hostname"`
	// Level is the current level number.
	Level int `json:"level"`
	// Failback is the configured failback, "auto" or "manual".
	Failback string `json:"failback"`
	// ManualHold is set by a manual switch to a level other than the top
	// level, and cleared by a manual switch to the top level; while it is
	// set failback is manual whatever the configuration says.
	ManualHold bool `json:"manual_hold"`
	// EffectiveFailback is what the next rounds do: Failback, or "manual"
	// while ManualHold is set.
	EffectiveFailback string `json:"effective_failback"`
	// Thresholds are the consecutive counts that change an origin's state.
	Thresholds Thresholds `json:"thresholds"`
	// Levels is each level's health by level number ("1": "healthy").
	Levels  map[string]string     `json:"levels"`
	Origins map[string]OriginView `json:"origins"`
	// Events are the events of the site's last probed round.
	Events []Event `json:"events"`
	// LastProbe is when the site was last probed; nil before the first.
	LastProbe *time.Time `json:"last_probe"`
	// Probing is "active", or "paused" with PausedWhy.
	Probing   string `json:"probing"`
	PausedWhy string `json:"paused_why,omitempty"`
	// Status sums the site up in one word (see the Status* constants).
	Status      string `json:"status"`
	Publication uint64 `json:"publication"`
	// Ramp is the failback ramp in progress, nil for none
	// (docs/antiflap.md#failback-ramp): Level gets Weight per cent of new
	// requests and From the rest; NextStepAt is when the next step is due
	// (taken at the first round from then whose Level is healthy).
	Ramp *RampView `json:"ramp,omitempty"`
	// Waiting is a failback that waits, nil for none: a level above
	// Level is healthy, yet the site stays, held by the failback dwell
	// or waiting for an operator's manual switch (docs/antiflap.md).
	Waiting *WaitingView `json:"waiting,omitempty"`
	// Drill is the failover drill running on the site, nil for none
	// (docs/drills.md).
	Drill *SiteDrillView `json:"drill,omitempty"`
	// DNSUpdate is the state of the dynamic update (publish
	// "dns_update") of the site's name; nil when no dns_update is
	// configured or the name is outside its zone.
	DNSUpdate *DNSUpdateView `json:"dns_update,omitempty"`
}

// The states of a DNSUpdateView.
const (
	// DNSUpdateOK: the primary took the last update.
	DNSUpdateOK = "ok"
	// DNSUpdateFailing: the last update failed (after its retries, or
	// refused); Error says why.
	DNSUpdateFailing = "failing"
	// DNSUpdateConflict: the primary's records were not those vigil last
	// wrote (a hand edit); they stay until the site's next change.
	DNSUpdateConflict = "conflict"
	// DNSUpdatePending: nothing pushed for the name yet.
	DNSUpdatePending = "pending"
	// DNSUpdateSkipped: the name is not pushed, because the site's
	// origins are host names (Error says so).
	DNSUpdateSkipped = "skipped"
	// DNSUpdateStandby: this instance does not push (a cluster's standby
	// or shard that is not the leader); the leader's view has the state.
	DNSUpdateStandby = "standby"
)

// DNSUpdateView is the dynamic update state of one site's name, in a
// SiteView (docs/dns.md#3-dynamic-update).
type DNSUpdateView struct {
	// Name is the DNS name updated; State one of the DNSUpdate* states.
	Name  string `json:"name"`
	State string `json:"state"`
	// Version is the publication last pushed (or tried); 0 before any.
	Version uint64 `json:"version,omitempty"`
	// Error says why the last update failed; Failures counts the failed
	// updates of the name since this instance began pushing.
	Error    string     `json:"error,omitempty"`
	Failures uint64     `json:"failures,omitempty"`
	At       *time.Time `json:"at,omitempty"`
}

// RampView is a failback ramp in progress, in a SiteView.
type RampView struct {
	From       int        `json:"from"`
	Weight     int        `json:"weight"`
	NextStepAt *time.Time `json:"next_step_at,omitempty"`
	// Step is the current step, counted from 1, of Steps: the configured
	// steps, the last (100) included. 0 when the configuration no longer
	// has the weight as a step.
	Step  int `json:"step,omitempty"`
	Steps int `json:"steps,omitempty"`
}

// Why a failback waits (a WaitingView's Why).
const (
	// WaitingDwell: an automatic failback waits out the failback dwell
	// on the current level (health_check { failback_dwell }); it goes at
	// the first round from Until whose level above is still healthy.
	WaitingDwell = "dwell"
	// WaitingManual: failback is manual (configured, or by a manual
	// hold); the site stays until an operator runs Command.
	WaitingManual = "manual"
)

// WaitingView is a failback that waits, in a SiteView: Level, above the
// current level, is healthy, and the site stays for Why.
type WaitingView struct {
	// Level is the level the site would fail back to: the highest
	// healthy level above the current one.
	Level int `json:"level"`
	// Why is WaitingDwell or WaitingManual.
	Why string `json:"why"`
	// Until is when the dwell ends (WaitingDwell only).
	Until *time.Time `json:"until,omitempty"`
	// Command is what an operator runs to fail back now, such as
	// "vigil switch www 1".
	Command string `json:"command"`
}

// SiteDrillView is the failover drill running on a site, in a SiteView:
// Level is drilled (voted down) from Started until Until at the latest.
type SiteDrillView struct {
	Level   int        `json:"level"`
	Started time.Time  `json:"started"`
	Until   *time.Time `json:"until,omitempty"`
	Actor   string     `json:"actor,omitempty"`
}

// TopLevel is the site's top level (the lowest level number); 0 when the
// view lists no level.
func (v *SiteView) TopLevel() int {
	top := 0
	for l := range v.Levels {
		n := 0
		for _, c := range l {
			if c < '0' || c > '9' {
				n = -1
				break
			}
			n = n*10 + int(c-'0')
		}
		if n > 0 && (top == 0 || n < top) {
			top = n
		}
	}
	return top
}

// Thresholds are a site's health thresholds: Unhealthy failed rounds in
// a row make an origin unhealthy, Healthy good ones make it healthy.
type Thresholds struct {
	Unhealthy int32 `json:"unhealthy"`
	Healthy   int32 `json:"healthy"`
}

// OriginView is one origin of a SiteView.
type OriginView struct {
	// State is "unknown", "healthy", "unhealthy" or "disabled".
	State string `json:"state"`
	// Failures and Successes are the consecutive down and up verdicts,
	// compared with the site's Thresholds (one of them is always 0).
	Failures  int32 `json:"failures"`
	Successes int32 `json:"successes"`
	// Verdict is the last round's: "up", "down" or "none".
	Verdict string `json:"verdict"`
	// By is the source that settled the verdict; nil when none did.
	By *string `json:"by"`
	// Asked are the sources asked, in chain order.
	Asked   []string `json:"asked"`
	Level   int      `json:"level"`
	Address string   `json:"address"`
	// Reason summarizes the last round's votes, such as
	// "direct: connect_failed: connection refused"; before the first
	// round since vigil started, why the state last changed.
	Reason string `json:"reason"`
	// Since is when State last changed.
	Since *time.Time `json:"since"`
	// Votes are every vote cast for the origin in the site's last round.
	Votes []VoteView `json:"votes"`
	// Flapping is set while the origin is held unhealthy as flapping
	// (docs/antiflap.md): since FlappingSince, until FlappingUntil at the
	// earliest (it moves while the origin keeps changing).
	Flapping      bool       `json:"flapping,omitempty"`
	FlappingSince *time.Time `json:"flapping_since,omitempty"`
	FlappingUntil *time.Time `json:"flapping_until,omitempty"`
	// QuarantineUntil is set while the origin is quarantined: it is not
	// shown healthy before then.
	QuarantineUntil *time.Time `json:"quarantine_until,omitempty"`
	// Partitions are the voter groups suspected of a path partition to
	// this origin at the site's last round: each voted it down alone
	// while other voters voted it up (docs/partition.md). Never switches
	// anything; absent when none.
	Partitions []PartitionView `json:"partitions,omitempty"`
}

// PartitionView is one suspected path partition of an origin.
type PartitionView struct {
	// Group is the voter group: a source and a value of the configured
	// voter label, such as "node/pop=eu", or the source alone ("direct").
	Group string `json:"group"`
	// Rounds is how many probed rounds in a row it has been alone.
	Rounds int `json:"rounds"`
	// Since is the start of the first of those rounds.
	Since time.Time `json:"since"`
}

// VoteView is one vote.
type VoteView struct {
	Source string `json:"source"`
	Voter  string `json:"voter"`
	// Value is "up", "down" or "abstain".
	Value string `json:"value"`
	// Reason is the standard reason ("ok", "http_5xx", "tls_failed",
	// "unsupported"...), the same for every plugin.
	Reason string `json:"reason"`
	// PluginReason, when set, refines Reason with a reason of the plugin's
	// own, namespaced by it: "tlscheck/cert_expiring", "dnspup/pending",
	// "vigil/missing_capability" (sdk/PROTOCOL.md, section 4). Absent
	// when the vote has none.
	PluginReason string  `json:"plugin_reason,omitempty"`
	Detail       string  `json:"detail,omitempty"`
	LatencyMS    float64 `json:"latency_ms"`
}

// A site's Status, from worst to best.
const (
	// StatusDown: the current level is unhealthy (every level is, or the
	// site could not move).
	StatusDown = "down"
	// StatusFailedOver: the site runs on a level below its top level.
	StatusFailedOver = "failed_over"
	// StatusDegraded: on its top level, with some enabled origin unhealthy.
	StatusDegraded = "degraded"
	// StatusPaused: health checks are paused (disabled, or fewer than two
	// enabled origins); the site keeps its level.
	StatusPaused = "paused"
	// StatusUnknown: the current level is not judged yet.
	StatusUnknown = "unknown"
	// StatusOK: on the top level, healthy, no origin unhealthy.
	StatusOK = "ok"
)

// Statuses lists every Status value, worst first.
var Statuses = []string{StatusDown, StatusFailedOver, StatusDegraded, StatusPaused, StatusUnknown, StatusOK}

// SitesPage is one page of GET /v1/sites.
type SitesPage struct {
	Round       uint64 `json:"round"`
	Publication uint64 `json:"publication"`
	// Total counts the sites that match the filters; Counts the whole
	// fleet by status.
	Total  int            `json:"total"`
	Counts map[string]int `json:"counts"`
	Sites  []*SiteView    `json:"sites"`
	// NextCursor, when not empty, is the cursor of the next page.
	NextCursor string `json:"next_cursor"`
}

// SitesQuery selects the sites of GET /v1/sites; its zero value selects
// every site.
type SitesQuery struct {
	// Statuses keeps the sites with one of these statuses.
	Statuses []string
	// Level keeps the sites on this level (0: any).
	Level int
	// Problem keeps the sites that need attention: down, failed over,
	// degraded or paused.
	Problem bool
	// Prefix keeps the sites whose name starts with it.
	Prefix string
	// Limit is the page size (0: the server's default).
	Limit int
	// Cursor is a page's NextCursor, for the page after it.
	Cursor string
}

// EventLine is one event of the journal as GET /v1/events shows it.
type EventLine struct {
	Seq   uint64    `json:"seq"`
	Time  time.Time `json:"time"`
	Site  string    `json:"site"`
	Round uint64    `json:"round,omitempty"`
	// Actor is who acted, for an operator's action (empty for a round's).
	Actor string `json:"actor,omitempty"`
	Event Event  `json:"event"`
}

// EventsPage is the answer of GET /v1/events.
type EventsPage struct {
	Events []EventLine `json:"events"`
}

// ActionResult is the answer of a switch or an origin action: the events
// it made (none when it changed nothing the journal records).
type ActionResult struct {
	Site   string  `json:"site"`
	Events []Event `json:"events"`
}

// ProbeResult is the answer of POST /v1/sites/{site}/probe (and of vigil
// probe -config): one dry-run round for a site.
type ProbeResult struct {
	Site     string        `json:"site"`
	Hostname string        `json:"hostname"`
	Origins  []ProbeOrigin `json:"origins"`
	// Failed lists, in chain order, the sources that were asked and gave
	// no answer: their origins passed on to the next source.
	Failed []ProbeFailure `json:"failed,omitempty"`
}

// ProbeFailure is a source that failed in a probe, with its error.
type ProbeFailure struct {
	Source string `json:"source"`
	Error  string `json:"error"`
}

// ProbeOrigin is one origin of a ProbeResult.
type ProbeOrigin struct {
	Origin  string     `json:"origin"`
	Address string     `json:"address"`
	Level   int        `json:"level"`
	Enabled bool       `json:"enabled"`
	Verdict string     `json:"verdict"`
	By      *string    `json:"by"`
	Asked   []string   `json:"asked"`
	Votes   []VoteView `json:"votes"`
}

// SourceStatus is what one source reports about itself, such as the node
// gateway's nodes (GET /v1/nodes).
type SourceStatus struct {
	Source  string     `json:"source"`
	Summary string     `json:"summary,omitempty"`
	Error   string     `json:"error,omitempty"`
	Items   []NodeView `json:"-"`
}

// NodeView is one item of a source's status, such as a node.
type NodeView struct {
	ID       string            `json:"id"`
	Source   string            `json:"source"`
	State    string            `json:"state"`
	Labels   map[string]string `json:"labels"`
	Detail   string            `json:"detail,omitempty"`
	LastSeen *time.Time        `json:"last_seen"`
}

// NodesAnswer is the answer of GET /v1/nodes: the online nodes, the
// offline ones not forgotten yet, and each reporting source's summary.
type NodesAnswer struct {
	Nodes   []NodeView     `json:"nodes"`
	Offline []NodeView     `json:"offline"`
	Sources []SourceStatus `json:"sources"`
}

// SourceInfo is one vote source of the agent's chain, as GET /v1/sources
// shows it: its plugin, its process and its counters since the agent
// started.
type SourceInfo struct {
	Name    string `json:"name"`
	Plugin  string `json:"plugin"`
	Version string `json:"version,omitempty"`
	// Protocol is the vote-source protocol version agreed with the
	// plugin at its last start (1 or 2; 0 before the first start).
	// SDKVersion is the SDK it was built with, as it says (empty for a
	// protocol-1 plugin). Capabilities are the capabilities its Info
	// declared (sdk/PROTOCOL.md); Unsupported counts the targets the
	// agent abstained on for it because they need one it lacks.
	Protocol     int      `json:"protocol,omitempty"`
	SDKVersion   string   `json:"sdk_version,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	Unsupported  uint64   `json:"unsupported,omitempty"`
	// PID is the plugin's process id; 0 while it is not running.
	PID      int    `json:"pid"`
	Starts   uint64 `json:"starts"`
	Restarts uint64 `json:"restarts"`
	Crashes  uint64 `json:"crashes"`
	Failures uint64 `json:"failures"`
	// LastError is the source's latest failure in a round (a crash, a
	// timeout or the plugin's own error, with its message), and
	// LastErrorAt when it happened; empty when it never failed.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// FailingRounds counts the rounds in a row, up to the latest one that
	// asked the source, in which it failed: more than 0 means the source
	// is in trouble now. RecentFailures counts the failed rounds among
	// its RecentRounds latest (at most 10).
	FailingRounds  int `json:"failing_rounds"`
	RecentRounds   int `json:"recent_rounds"`
	RecentFailures int `json:"recent_failures"`
}

// Failing reports whether the source failed the latest round that asked
// it.
func (s SourceInfo) Failing() bool { return s.FailingRounds > 0 }

// SourcesAnswer is the answer of GET /v1/sources, in chain order.
type SourcesAnswer struct {
	Sources []SourceInfo `json:"sources"`
}

// ReloadAnswer is the answer of POST /v1/reload: what the reload of the
// configuration file applied. A refused reload is an *Error with
// CodeReloadRefused instead, whose message carries the diagnostics.
type ReloadAnswer struct {
	// Reloaded is true when everything that changed was applied.
	Reloaded bool `json:"reloaded"`
	// Applied names what changed and is in force now.
	Applied []string `json:"applied"`
	// NeedRestart names the settings that changed but take effect only
	// at the next start.
	NeedRestart []string `json:"need_restart,omitempty"`
	// Failed says what could not be applied (the old part stays).
	Failed []string `json:"failed,omitempty"`
}
