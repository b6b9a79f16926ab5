package store

import "time"

// OriginAntiFlap is what is kept of an origin's anti-flap memory
// (docs/antiflap.md). It is written only for a site with a quarantine or a
// flap rule; a record without it (every record before issue 17) means "no
// anti-flap state": the origin's judged state is its state, with no
// quarantine, no hold and no recent change.
type OriginAntiFlap struct {
	// Judged is the state the thresholds alone give ("healthy",
	// "unhealthy", "unknown"), which State shows except while quarantined
	// or held.
	Judged string `json:"judged"`
	// Held is set while the origin is held unhealthy as flapping, since
	// HeldSince.
	Held      bool      `json:"held,omitempty"`
	HeldSince time.Time `json:"held_since,omitzero"`
	// QuarantineUntil is when the quarantine ends; absent: none.
	QuarantineUntil time.Time `json:"quarantine_until,omitzero"`
	// LastChange is when the judged state last changed between healthy
	// and unhealthy, and Changes the recent such changes, oldest first
	// (the flap rule's window).
	LastChange time.Time   `json:"last_change,omitzero"`
	Changes    []time.Time `json:"changes,omitempty"`
}

// SiteRamp is what is kept of a failback ramp in progress
// (docs/antiflap.md#failback-ramp): the site's current level is the
// recovering level.
type SiteRamp struct {
	// From is the level number the failback left.
	From int `json:"from"`
	// Weight is the per cent of new requests the current level gets: one
	// of the ramp's steps (a restore under other steps takes the first step
	// at or above it).
	Weight int `json:"weight"`
	// StepAt is when the current step began.
	StepAt time.Time `json:"step_at,omitzero"`
}
