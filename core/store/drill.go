package store

import "time"

// SiteDrill is what is kept of a site's failover drill (docs/drills.md):
// running while Ended is zero; once ended, kept until the site is back on
// FromLevel, so that its way back is still marked as the drill's. A record
// without it (every record before issue 36) means "no drill".
type SiteDrill struct {
	// Level is the drilled level; FromLevel the site's level when the
	// drill started.
	Level     int `json:"level"`
	FromLevel int `json:"from_level"`
	// Started is when it started; Until when its time is up.
	Started time.Time `json:"started"`
	Until   time.Time `json:"until"`
	// Actor is who started it.
	Actor string `json:"actor,omitempty"`
	// Ended is when it ended, End why (decide.DrillEnd*).
	Ended time.Time `json:"ended,omitzero"`
	End   string    `json:"end,omitempty"`
}
