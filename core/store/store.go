package store

import (
	"context"
	"errors"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
)

// Site is what is kept of one site.
type Site struct {
	Name       string `json:"name"`
	Level      int    `json:"level"`
	ManualHold bool   `json:"manual_hold,omitempty"`
	Alerted    bool   `json:"alerted,omitempty"`
	// Baseline is each level's health at the end of the site's last probed
	// round, by level number; nil before the first round.
	Baseline map[int]string `json:"baseline,omitempty"`
	// LastProbed is the round sequence number that last probed the site.
	LastProbed   uint64            `json:"last_probed,omitempty"`
	LastProbedAt time.Time         `json:"last_probed_at,omitzero"`
	Origins      map[string]Origin `json:"origins"`
	// LevelSince is when an automatic switch last entered the current
	// level, for the failback dwell (docs/antiflap.md); absent: none.
	LevelSince time.Time `json:"level_since,omitzero"`
	// Ramp is the failback ramp in progress (antiflap.go); absent (nil)
	// means none, as in every record written before the ramp existed.
	Ramp *SiteRamp `json:"ramp,omitempty"`
	// Drill is the site's failover drill (drill.go); absent (nil): none.
	Drill *SiteDrill `json:"drill,omitempty"`
}

// Origin is what is kept of one origin.
type Origin struct {
	State     string `json:"state"`
	Failures  int32  `json:"failures,omitempty"`
	Successes int32  `json:"successes,omitempty"`
	// Reason is why State last changed, such as "direct: timeout".
	Reason string `json:"reason,omitempty"`
	// Since is when State last changed.
	Since time.Time `json:"since,omitzero"`
	// DisabledBy says who disabled the origin: "config" or "operator".
	DisabledBy string `json:"disabled_by,omitempty"`
	// AntiFlap is the origin's anti-flap memory (antiflap.go); absent
	// (nil) means none, as in every record written before issue 17.
	AntiFlap *OriginAntiFlap `json:"anti_flap,omitempty"`
}

// Event is one journal entry.
type Event struct {
	// Seq numbers events from 1, without gaps, across restarts.
	Seq uint64 `json:"seq"`
	// Time is the start of the round that made the event (0 < Round), or
	// when an operator acted or a reload changed the site.
	Time  time.Time    `json:"time"`
	Site  string       `json:"site"`
	Round uint64       `json:"round,omitempty"` // 0 for an operator action
	Actor string       `json:"actor,omitempty"` // who acted, for operator actions
	Event decide.Event `json:"event"`
}

// Meta holds the counters.
type Meta struct {
	// Round is the sequence number of the last committed round.
	Round uint64 `json:"round"`
	// LastEvent is the Seq of the last event written.
	LastEvent uint64 `json:"last_event"`
	// Publication is the publication version.
	Publication uint64 `json:"publication"`
	// PublicationDigest identifies the content published under
	// Publication, so that a restart republishes the same version only
	// when the content is the same.
	PublicationDigest string `json:"publication_digest,omitempty"`
	// ProbedAll is the last round that probed every site eligible at the
	// time, and ProbedAllAt when it ran: no eligible site had been probed
	// longer ago than that. Such a round writes no per-site probe marks.
	ProbedAll   uint64    `json:"probed_all,omitempty"`
	ProbedAllAt time.Time `json:"probed_all_at,omitzero"`
}

// Probe is the scheduler's memory of one site: the round that last probed
// it and when. A round that probes only some of the eligible sites writes
// one per probed site; the site records themselves are written only when
// a site's state changes.
type Probe struct {
	Site  string
	Round uint64
	At    time.Time
}

// State is everything Load returns.
type State struct {
	Meta  Meta
	Sites map[string]Site
	// Cursors maps a notifier name to the Seq of the last event it
	// delivered.
	Cursors map[string]uint64
}

// Batch is one atomic write.
type Batch struct {
	Meta Meta
	// Sites are written whole (replacing what was there).
	Sites []Site
	// Deleted are sites removed from the configuration.
	Deleted []string
	// Events are appended; their Seq must follow Meta.LastEvent of the
	// previous commit. Events the journal bound would drop at once (more
	// than it keeps) are not written.
	Events []Event
	// Probed are the probe marks of a round that did not probe every
	// eligible site.
	Probed []Probe
}

// Store is the persistence interface the engine uses.
type Store interface {
	// Load reads everything (an empty State on first start). A site's
	// LastProbed and LastProbedAt are the later of its record's and its
	// probe mark's.
	Load(ctx context.Context) (*State, error)
	// Cursors reads the counters and the notifiers' delivery cursors
	// without the sites (what the notifiers need to start).
	Cursors(ctx context.Context) (Meta, map[string]uint64, error)
	// Commit writes a batch atomically: all of it or none.
	Commit(ctx context.Context, b Batch) error
	// Events returns up to limit journal events with Seq > after, oldest
	// first, only of site when site is not empty.
	Events(ctx context.Context, after uint64, site string, limit int) ([]Event, error)
	// SetCursor records that notifier delivered every event up to seq.
	SetCursor(ctx context.Context, notifier string, seq uint64) error
	// Close flushes and releases the store.
	Close() error
}

// ErrClosed is returned by a store used after Close.
var ErrClosed = errors.New("store is closed")

// DefaultJournalSize is how many events the journal keeps by default.
const DefaultJournalSize = 10000
