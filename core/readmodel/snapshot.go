package readmodel

import (
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
	"github.com/vigilcdn/vigil/sdk"
)

// Snapshot is one commit's immutable copy of every site, as the engine
// keeps it (core/engine's Views). Sites are in name order; i is a site's
// position. Its methods never block on a round and may be called from any
// goroutine.
type Snapshot interface {
	// Len is the number of sites.
	Len() int
	// Index returns the position of the named site, or -1.
	Index(name string) int
	// Name returns the name of the site at position i.
	Name(i int) string
	// Commit returns the round and the publication version of the
	// commit the snapshot was taken after.
	Commit() (round, publication uint64)
	// State sets s to the state of the site at position i, reusing s's
	// slice: all that Status and Summary need, cheap enough for a pass
	// over the whole fleet.
	State(i int, s *SiteState)
	// Fill sets s to the whole site at position i: its state and the
	// detail a view shows (the last round's events and votes).
	Fill(i int, s *Site)
}

// SiteState is a site's state as of a commit. Its Spec and Levels are
// shared with the snapshot and must not be modified.
type SiteState struct {
	Spec *decide.SiteSpec
	// Level is the current level number; ManualHold is set by a manual
	// switch off the top level.
	Level      int
	ManualHold bool
	// Levels is each level's health, in the order of Spec.Levels.
	Levels []decide.Health
	// Origins are in the order of Spec.Origins.
	Origins []OriginState
}

// OriginState is one origin's state and its consecutive verdicts.
type OriginState struct {
	State               decide.Health
	Failures, Successes int32
}

// Site is one site as of a commit, with what its view shows beside the
// state. Its slices are the caller's to keep, but for those the
// SiteState shares and Events, which must not be modified.
type Site struct {
	SiteState
	Hostname string
	// Round is the site's last probed round and ProbedAt when it was
	// probed: 0 and the zero time before the first.
	Round    uint64
	ProbedAt time.Time
	// Probed says whether the snapshot holds the record of that round
	// (the votes, the events): false before the first round since vigil
	// started, when Round and ProbedAt come from the store.
	Probed bool
	// Events are the events of the site's last probed round (Probed).
	Events []decide.Event
	// Ramp is the failback ramp in progress, nil for none.
	Ramp *Ramp
	// DwellUntil is when the failback dwell on the current level ends;
	// the zero time when none holds (decide.DwellUntil).
	DwellUntil time.Time
	// Drill is the failover drill running on the site, nil for none.
	Drill *Drill
	// Details are each origin's, in the order of Spec.Origins.
	Details []Origin
}

// Origin is what a view shows of one origin beside its OriginState.
type Origin struct {
	Address string
	// Cause says why the state last changed, such as "direct: timeout";
	// Since is when (the zero time when unknown).
	Cause string
	Since time.Time
	// Verdict, By (the settling source's name, "" for none), Asked (the
	// sources asked, in chain order), Votes and Reason (the votes summed
	// up) are the last round's, when the Site is Probed.
	Verdict vote.Verdict
	By      string
	Asked   []string
	Votes   []Vote
	Reason  string
	// Flapping is set while the origin is held unhealthy as flapping,
	// since FlappingSince until FlappingUntil at the earliest;
	// QuarantineUntil while it is quarantined. Zero times are unknown or
	// none.
	Flapping                                      bool
	FlappingSince, FlappingUntil, QuarantineUntil time.Time
	// Partitions are the path partitions suspected at the last round.
	Partitions []Partition
}

// Vote is one vote of a round.
type Vote struct {
	Source, Voter string
	Value         sdk.Value
	Reason        sdk.Reason
	// PluginReason is the plugin's own namespaced reason, or empty.
	PluginReason string
	Detail       string
	Latency      time.Duration
}

// Partition is a suspected path partition of an origin: Group voted it
// down alone for Rounds rounds in a row, since Since.
type Partition struct {
	Group  string
	Rounds int
	Since  time.Time
}

// Ramp is a failback ramp in progress: Level (the Site's) gets Weight per
// cent of new requests and From the rest; the next step is due at NextAt
// (the zero time when none is).
type Ramp struct {
	From, Weight int
	NextAt       time.Time
}

// Drill is a failover drill running on a site: Level is drilled since
// Started, until Until at the latest (the zero time when unknown).
type Drill struct {
	Level          int
	Started, Until time.Time
	Actor          string
}
