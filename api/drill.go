package api

import (
	"context"
	"net/http"
	"time"
)

// DrillSource is the source name a failover drill's votes are cast under
// (docs/drills.md): a vote or a verdict "by" drill is the drill's, never a
// probe's.
const DrillSource = "drill"

// Why a drill ended (a KindDrillEnded event's End, Drill.End).
const (
	// DrillEndTime: the drill's duration passed.
	DrillEndTime = "time_up"
	// DrillEndAborted: an operator aborted it.
	DrillEndAborted = "aborted"
	// DrillEndSteppedAside: another level of the site really failed, so
	// the drill stepped aside for the real failure.
	DrillEndSteppedAside = "stepped_aside"
	// DrillEndGone: the configuration no longer has the drilled level.
	DrillEndGone = "level_gone"
)

// DrillRequest is the body of POST /v1/sites/{site}/drill.
type DrillRequest struct {
	// Level is the level to drill; 0 (or absent) is the site's current
	// level.
	Level int `json:"level,omitempty"`
	// For is how long the drill lasts, a Go duration such as "5m"; empty
	// is 5 minutes, at most 24 hours.
	For string `json:"for,omitempty"`
}

// Drill is a site's failover drill: the answer of POST, DELETE and GET
// /v1/sites/{site}/drill.
type Drill struct {
	Site string `json:"site"`
	// Level is the drilled level; FromLevel the site's level when the
	// drill started (where it returns to).
	Level     int `json:"level"`
	FromLevel int `json:"from_level"`
	// Origins are the drilled level's origins: they get the drill's down
	// votes while it runs.
	Origins []string `json:"origins"`
	// Started is when the drill started, Until when its time is up (it
	// ends at the first round after).
	Started time.Time `json:"started"`
	Until   time.Time `json:"until"`
	// Actor is who started it.
	Actor string `json:"actor,omitempty"`
	// Running is true while the drill runs. Once it has ended (Ended, End:
	// one of the DrillEnd* values) GET still shows it until the site is
	// back on FromLevel.
	Running bool      `json:"running"`
	Ended   time.Time `json:"ended,omitzero"`
	End     string    `json:"end,omitempty"`
}

// StartDrill starts a failover drill of site (POST /v1/sites/{site}/drill,
// the operator's token). A refusal is an *Error whose Code says why:
// unknown_site, unknown_level, bad_duration, drill_running, site_paused,
// manual_hold, no_healthy_level, or not_leader (421, an HA standby: its
// Hint names the leader).
func (c *Client) StartDrill(ctx context.Context, site string, req DrillRequest) (*Drill, error) {
	var out Drill
	if err := c.Do(ctx, http.MethodPost, sitePath(site)+"/drill", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AbortDrill ends site's running drill now (DELETE
// /v1/sites/{site}/drill); code no_drill when none runs.
func (c *Client) AbortDrill(ctx context.Context, site string) (*Drill, error) {
	var out Drill
	if err := c.Do(ctx, http.MethodDelete, sitePath(site)+"/drill", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Drill returns site's drill, running or on its way back (GET
// /v1/sites/{site}/drill); code no_drill when it has none.
func (c *Client) Drill(ctx context.Context, site string) (*Drill, error) {
	var out Drill
	if err := c.Do(ctx, http.MethodGet, sitePath(site)+"/drill", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
