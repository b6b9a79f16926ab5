package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/api"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/store"
)

// The titles of the notices, as the product names them.
const (
	TitleSwitchedAutomatically = "Origin level switched automatically"
	TitleSwitchedManually      = "Origin level switched manually"
	TitleResetByConfig         = "Origin level reset by configuration"
	TitleFailbackAvailable     = "Origin recovered (manual failback available)"
	TitleAllLevelsUnhealthy    = "All origin levels unhealthy"
	TitleOriginState           = "Origin state changed"
)

// Severities of a notice.
const (
	SeverityCritical = "critical"
	SeverityWarning  = "warning"
	SeverityInfo     = "info"
)

// Notice is one journal event worded for people. Its JSON form is the body
// of a format = "json" webhook (see the package documentation).
type Notice struct {
	// Seq is the journal sequence number of the event: unique, increasing,
	// and the same on every redelivery (receivers may deduplicate on it).
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Site string    `json:"site"`
	// Kind is the event kind: level_switched, failback_available,
	// all_levels_unhealthy or origin_state.
	Kind string `json:"kind"`
	// Reason is why a level_switched happened: failover, failback, manual
	// or config.
	Reason   string `json:"reason,omitempty"`
	Severity string `json:"severity"`
	Title    string `json:"title"`
	Text     string `json:"text"`
	Levels   Levels `json:"levels"`
	// Origin is set for origin_state.
	Origin *OriginChange `json:"origin,omitempty"`
	// Actor is who acted, for operator actions (a manual switch).
	Actor string `json:"actor,omitempty"`
	// Round is the round that emitted the event, 0 for an operator action.
	Round uint64 `json:"round,omitempty"`
	// Drill is set for a drill's own events (drill_started, drill_ended)
	// and for what happened during a failover drill or its way back: a
	// rehearsal, not an outage (docs/drills.md). Its Text starts "Drill: ".
	Drill bool `json:"drill,omitempty"`
}

// Levels are the level numbers a notice is about; fields that do not apply
// to the kind are left out.
type Levels struct {
	// From and To are the levels of a level_switched.
	From int `json:"from,omitempty"`
	To   int `json:"to,omitempty"`
	// Current is the level the site is on after the event (level_switched
	// and all_levels_unhealthy).
	Current int `json:"current,omitempty"`
	// Available is the healthy higher level of a failback_available.
	Available int `json:"available,omitempty"`
}

// OriginChange is the state change of an origin_state notice.
type OriginChange struct {
	Name string `json:"name"`
	From string `json:"from"`
	To   string `json:"to"`
}

// NoticeOf words a journal event. Every event kind has a notice; which ones
// are sent where is the Dispatcher's business.
func NoticeOf(e store.Event) Notice {
	n := noticeOf(e)
	if n.Drill && !strings.HasPrefix(n.Text, "Drill: ") {
		n.Text = "Drill: " + n.Text
	}
	return n
}

func noticeOf(e store.Event) Notice {
	ev := e.Event
	n := Notice{
		Seq:   e.Seq,
		Time:  e.Time.UTC(),
		Site:  e.Site,
		Kind:  ev.Kind.String(),
		Actor: e.Actor,
		Round: e.Round,
		Drill: ev.Drill,
	}
	switch ev.Kind {
	case decide.KindLevelSwitched:
		n.Reason = ev.Reason.String()
		n.Levels = Levels{From: ev.FromLevel, To: ev.ToLevel, Current: ev.ToLevel}
		switch ev.Reason {
		case decide.ReasonFailover:
			n.Severity, n.Title = SeverityWarning, TitleSwitchedAutomatically
			n.Text = fmt.Sprintf("Site %s switched from level %d to level %d (failover: level %d is unhealthy).", e.Site, ev.FromLevel, ev.ToLevel, ev.FromLevel)
		case decide.ReasonFailback:
			n.Severity, n.Title = SeverityInfo, TitleSwitchedAutomatically
			n.Text = fmt.Sprintf("Site %s switched from level %d back to level %d (failback: level %d is healthy again).", e.Site, ev.FromLevel, ev.ToLevel, ev.ToLevel)
		case decide.ReasonManual:
			who := e.Actor
			if who == "" {
				who = "an unnamed operator"
			}
			n.Severity, n.Title = SeverityInfo, TitleSwitchedManually
			n.Text = fmt.Sprintf("Site %s was switched from level %d to level %d by %s at %s.", e.Site, ev.FromLevel, ev.ToLevel, who, n.Time.Format(time.RFC3339))
		case decide.ReasonConfig:
			n.Severity, n.Title = SeverityWarning, TitleResetByConfig
			n.Text = fmt.Sprintf("Site %s moved from level %d to level %d, its top level: the configuration no longer has level %d.", e.Site, ev.FromLevel, ev.ToLevel, ev.FromLevel)
		default:
			n.Severity, n.Title = SeverityWarning, TitleSwitchedAutomatically
			n.Text = fmt.Sprintf("Site %s switched from level %d to level %d (%s).", e.Site, ev.FromLevel, ev.ToLevel, ev.Reason)
		}
	case decide.KindFailbackAvailable:
		n.Severity, n.Title = SeverityInfo, TitleFailbackAvailable
		n.Levels = Levels{Available: ev.Level}
		n.Text = fmt.Sprintf("Site %s: level %d is healthy again. Failback is manual: switch back with `vigil switch %s %d`.", e.Site, ev.Level, e.Site, ev.Level)
	case decide.KindAllLevelsUnhealthy:
		n.Severity, n.Title = SeverityCritical, TitleAllLevelsUnhealthy
		n.Levels = Levels{Current: ev.Level}
		n.Text = fmt.Sprintf("Site %s: every origin level is unhealthy; it stays on level %d.", e.Site, ev.Level)
	case decide.KindOriginFlapping:
		n.Origin = &OriginChange{Name: ev.Origin}
		if ev.Flapping {
			n.Severity, n.Title = SeverityWarning, "Origin flapping (held unhealthy)"
			n.Text = fmt.Sprintf("Site %s: origin %s changes state too often; it is held unhealthy until it has been stable (docs/antiflap.md).", e.Site, ev.Origin)
		} else {
			n.Severity, n.Title = SeverityInfo, "Origin stable again (no longer held)"
			n.Text = fmt.Sprintf("Site %s: origin %s is no longer held as flapping.", e.Site, ev.Origin)
		}
	case decide.KindPathPartitionSuspected:
		n.Origin = &OriginChange{Name: ev.Origin}
		if ev.Suspected {
			n.Severity, n.Title = SeverityWarning, "Path partition suspected"
			n.Text = fmt.Sprintf("Site %s: every voter of %s voted origin %s down for %d rounds in a row while the other voters saw it up: probably a transit problem of that group, not the origin. Nothing was switched for it (docs/partition.md).", e.Site, ev.Group, ev.Origin, ev.Rounds)
		} else {
			n.Severity, n.Title = SeverityInfo, "Path partition no longer suspected"
			n.Text = fmt.Sprintf("Site %s: the voters of %s no longer disagree alone about origin %s (suspected for %d rounds).", e.Site, ev.Group, ev.Origin, ev.Rounds)
		}
	case decide.KindDrillStarted:
		who := e.Actor
		if who == "" {
			who = "an unnamed operator"
		}
		n.Drill, n.Severity, n.Title = true, SeverityInfo, "Failover drill started"
		n.Levels = Levels{Current: ev.Level}
		n.Text = fmt.Sprintf("Site %s: %s started a failover drill of level %d for %s: its origins get the drill's down votes, and what follows (failover, publication, alerts labelled drill=\"true\") is real. Abort it with `vigil drill -abort %s`.",
			e.Site, who, ev.Level, time.Duration(ev.Seconds)*time.Second, e.Site)
	case decide.KindDrillEnded:
		n.Drill, n.Severity, n.Title = true, SeverityInfo, "Failover drill ended"
		n.Levels = Levels{Current: ev.Level}
		why := map[string]string{
			decide.DrillEndTime:         "its time is up",
			decide.DrillEndAborted:      "it was aborted",
			decide.DrillEndSteppedAside: "another level of the site really failed, so the drill stepped aside for the real failure",
			decide.DrillEndGone:         "the configuration no longer has the drilled level",
		}[ev.End]
		if why == "" {
			why = ev.End
		}
		n.Text = fmt.Sprintf("Site %s: the failover drill of level %d ended: %s. The site's failback applies from now.", e.Site, ev.Level, why)
		if ev.End == decide.DrillEndSteppedAside {
			n.Severity = SeverityWarning
		}
	case decide.KindFailoverTimed:
		n.Severity, n.Title = SeverityInfo, "Failover timed"
		n.Text = failoverTimedText(e.Site, ev.Report)
	case decide.KindRampStep:
		n.Severity, n.Title = SeverityInfo, "Failback ramp step"
		n.Levels = Levels{From: ev.FromLevel, To: ev.Level}
		if ev.Weight >= 100 {
			n.Text = fmt.Sprintf("Site %s: the failback ramp to level %d is complete: it gets every new request.", e.Site, ev.Level)
		} else {
			n.Text = fmt.Sprintf("Site %s: the failback ramp gives level %d %d%% of new requests, level %d the rest.", e.Site, ev.Level, ev.Weight, ev.FromLevel)
		}
	case decide.KindOriginState:
		n.Severity, n.Title = SeverityInfo, TitleOriginState
		if ev.To == decide.Unhealthy {
			n.Severity = SeverityWarning
		}
		n.Origin = &OriginChange{Name: ev.Origin, From: ev.From.String(), To: ev.To.String()}
		n.Text = fmt.Sprintf("Site %s: origin %s is now %s (was %s).", e.Site, ev.Origin, ev.To, ev.From)
	default:
		n.Severity, n.Title = SeverityInfo, ev.Kind.String()
		n.Text = fmt.Sprintf("Site %s: %s.", e.Site, ev)
	}
	return n
}

// failoverTimedText words a failover_timed event's report: the steps'
// durations and how many nodes reported (docs/failover-time.md).
func failoverTimedText(site, report string) string {
	var r api.FailoverReport
	if err := json.Unmarshal([]byte(report), &r); err != nil {
		return fmt.Sprintf("Site %s: a failover was timed, but its report cannot be read (%v); see vigil failovers %s.", site, err, site)
	}
	secs := func(p *float64) string {
		if p == nil {
			return "not measured"
		}
		return fmt.Sprintf("%.3fs", *p)
	}
	reported := 0
	for _, nd := range r.Nodes {
		if nd.Reported {
			reported++
		}
	}
	return fmt.Sprintf("Site %s: the failover from level %d to %d took detect %s, publish %s, edges %s (%d of %d nodes reported); vigil failovers %s shows each node.",
		site, r.FromLevel, r.ToLevel, secs(r.DetectSeconds), secs(r.PublishSeconds), secs(r.EdgeSeconds), reported, len(r.Nodes), site)
}
