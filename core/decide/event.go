package decide

import (
	"encoding/json"
	"fmt"
)

// EventKind names what happened.
type EventKind uint8

const (
	// KindOriginState: an origin's state changed (Origin, From, To).
	KindOriginState EventKind = iota + 1
	// KindLevelSwitched: the current level changed (FromLevel, ToLevel, Reason).
	KindLevelSwitched
	// KindFailbackAvailable: with manual failback, a higher level is healthy
	// again (Level).
	KindFailbackAvailable
	// KindAllLevelsUnhealthy: every level is unhealthy; the site stays on Level.
	KindAllLevelsUnhealthy
	// KindOriginFlapping: an origin's flapping hold began (Flapping true)
	// or ended (Flapping false); see docs/antiflap.md.
	KindOriginFlapping
	// KindPathPartitionSuspected: every voter of one group (a source and a
	// voter label's value) voted an origin down for Rounds rounds in a row
	// while voters outside the group voted it up (Suspected true), or that
	// suspicion ended (Suspected false); see docs/partition.md. It never
	// switches anything.
	KindPathPartitionSuspected
	// KindDrillStarted: an operator started a failover drill of Level for
	// Seconds (docs/drills.md); the actor is the journal entry's.
	KindDrillStarted
	// KindDrillEnded: the drill of Level ended, End saying why (one of
	// the DrillEnd* values).
	KindDrillEnded
	// KindFailoverTimed: the time a failover took, from its first failed
	// verdict to the nodes' edges (Report, the JSON of an
	// api.FailoverReport; docs/failover-time.md). Journaled by the engine
	// once the nodes reported; the decision core never makes it.
	KindFailoverTimed
	// KindRampStep: a failback ramp moved: Level (the recovering level)
	// now gets Weight per cent of new requests, FromLevel (the level the
	// failback left) the rest; Weight 100 ends the ramp. The engine
	// journals it (docs/antiflap.md#failback-ramp); the decision core's
	// Round does not return it, so that a replay's events stay the
	// rules' own.
	KindRampStep

	// LastKind is the highest kind, for loops over every kind.
	LastKind = KindRampStep
)

// Why a drill ended (a KindDrillEnded's End).
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

var kindNames = [...]string{"", "origin_state", "level_switched", "failback_available", "all_levels_unhealthy", "origin_flapping", "path_partition_suspected", "drill_started", "drill_ended", "failover_timed", "ramp_step"}

// ParseKind returns the kind spelled s, or 0 and false.
func ParseKind(s string) (EventKind, bool) {
	for i, n := range kindNames {
		if n == s && i != 0 {
			return EventKind(i), true
		}
	}
	return 0, false
}

// String returns the spelling used in output and the API.
func (k EventKind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("event(%d)", k)
}

// Reason says why a level switch happened.
type Reason uint8

const (
	// ReasonFailover: the current level was unhealthy.
	ReasonFailover Reason = iota + 1
	// ReasonFailback: automatic failback to a healthy higher level.
	ReasonFailback
	// ReasonManual: an operator switched.
	ReasonManual
	// ReasonConfig: the configuration no longer has the current level; the
	// site moved to its top level.
	ReasonConfig
)

var reasonNames = [...]string{"", "failover", "failback", "manual", "config"}

// String returns the spelling used in output and the API.
func (r Reason) String() string {
	if int(r) < len(reasonNames) && r != 0 {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", r)
}

// Event is one thing that happened to a site. Which fields are meaningful
// depends on Kind.
type Event struct {
	Kind   EventKind
	Origin string // OriginState
	From   Health // OriginState
	To     Health // OriginState
	// FromLevel, ToLevel and Reason describe a KindLevelSwitched.
	FromLevel, ToLevel int
	Reason             Reason
	// Level is the level of a KindFailbackAvailable or KindAllLevelsUnhealthy.
	Level int
	// Flapping says whether a KindOriginFlapping (Origin) began or ended.
	Flapping bool
	// Group, Rounds and Suspected describe a KindPathPartitionSuspected
	// (Origin): the voter group ("node/pop=eu"), the rounds in a row it
	// voted alone against the others, and whether the suspicion began.
	Group     string
	Rounds    int
	Suspected bool
	// Seconds is a KindDrillStarted's duration; End is why a
	// KindDrillEnded ended (DrillEnd*). Both use Level too.
	Seconds int
	End     string
	// Drill marks an event made while a drill ran on the site, or during
	// the way back from one (written "drill": true, only when set).
	Drill bool
	// Report is a KindFailoverTimed's report, the JSON of an
	// api.FailoverReport, kept as it is (a string keeps Event comparable).
	Report string
	// Weight is a KindRampStep's per cent of new requests for Level
	// (FromLevel gets the rest).
	Weight int
}

// MarshalJSON writes the event in the shape of docs/simulate.md ("The
// output"), with "drill": true after its fields when Drill is set.
func (e Event) MarshalJSON() ([]byte, error) {
	b, err := e.marshalKind()
	if err != nil || !e.Drill || len(b) < 2 {
		return b, err
	}
	return append(b[:len(b)-1], `,"drill":true}`...), nil
}

func (e Event) marshalKind() ([]byte, error) {
	switch e.Kind {
	case KindOriginState:
		return json.Marshal(struct {
			Kind   string `json:"kind"`
			Origin string `json:"origin"`
			From   string `json:"from"`
			To     string `json:"to"`
		}{e.Kind.String(), e.Origin, e.From.String(), e.To.String()})
	case KindLevelSwitched:
		return json.Marshal(struct {
			Kind   string `json:"kind"`
			From   int    `json:"from"`
			To     int    `json:"to"`
			Reason string `json:"reason"`
		}{e.Kind.String(), e.FromLevel, e.ToLevel, e.Reason.String()})
	case KindFailbackAvailable, KindAllLevelsUnhealthy:
		return json.Marshal(struct {
			Kind  string `json:"kind"`
			Level int    `json:"level"`
		}{e.Kind.String(), e.Level})
	case KindOriginFlapping:
		return json.Marshal(struct {
			Kind     string `json:"kind"`
			Origin   string `json:"origin"`
			Flapping bool   `json:"flapping"`
		}{e.Kind.String(), e.Origin, e.Flapping})
	case KindPathPartitionSuspected:
		return json.Marshal(struct {
			Kind      string `json:"kind"`
			Origin    string `json:"origin"`
			Group     string `json:"group"`
			Rounds    int    `json:"rounds"`
			Suspected bool   `json:"suspected"`
		}{e.Kind.String(), e.Origin, e.Group, e.Rounds, e.Suspected})
	case KindDrillStarted:
		return json.Marshal(struct {
			Kind    string `json:"kind"`
			Level   int    `json:"level"`
			Seconds int    `json:"seconds"`
		}{e.Kind.String(), e.Level, e.Seconds})
	case KindDrillEnded:
		return json.Marshal(struct {
			Kind  string `json:"kind"`
			Level int    `json:"level"`
			End   string `json:"end"`
		}{e.Kind.String(), e.Level, e.End})
	case KindFailoverTimed:
		return json.Marshal(struct {
			Kind   string          `json:"kind"`
			Report json.RawMessage `json:"report"`
		}{e.Kind.String(), json.RawMessage(e.Report)})
	case KindRampStep:
		return json.Marshal(struct {
			Kind   string `json:"kind"`
			Level  int    `json:"level"`
			From   int    `json:"from"`
			Weight int    `json:"weight"`
		}{e.Kind.String(), e.Level, e.FromLevel, e.Weight})
	}
	return nil, fmt.Errorf("event kind %d has no JSON form", e.Kind)
}

// UnmarshalJSON reads the shape written by MarshalJSON.
func (e *Event) UnmarshalJSON(b []byte) error {
	var raw struct {
		Kind   string `json:"kind"`
		Origin string `json:"origin"`
		From   any    `json:"from"`
		To     any    `json:"to"`
		Reason string `json:"reason"`
		Level  int    `json:"level"`
		// Flapping is read as a pointer: origin_flapping must say it.
		Flapping *bool `json:"flapping"`
		// Suspected is read as a pointer: path_partition_suspected must say it.
		Suspected *bool  `json:"suspected"`
		Group     string `json:"group"`
		Rounds    int    `json:"rounds"`
		Seconds   int    `json:"seconds"`
		End       string `json:"end"`
		Drill     bool   `json:"drill"`
		Weight    int    `json:"weight"`
		// Report is kept as it is.
		Report json.RawMessage `json:"report"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*e = Event{Drill: raw.Drill}
	e.Kind, _ = ParseKind(raw.Kind)
	switch e.Kind {
	case KindOriginState:
		from, _ := raw.From.(string)
		to, _ := raw.To.(string)
		f, err := ParseHealth(from)
		if err != nil {
			return err
		}
		t, err := ParseHealth(to)
		if err != nil {
			return err
		}
		e.Origin, e.From, e.To = raw.Origin, f, t
	case KindLevelSwitched:
		from, _ := raw.From.(float64)
		to, _ := raw.To.(float64)
		e.FromLevel, e.ToLevel = int(from), int(to)
		for i, n := range reasonNames {
			if n == raw.Reason && i != 0 {
				e.Reason = Reason(i)
			}
		}
		if e.Reason == 0 {
			return fmt.Errorf("level_switched reason %q is unknown", raw.Reason)
		}
	case KindFailbackAvailable, KindAllLevelsUnhealthy:
		e.Level = raw.Level
	case KindOriginFlapping:
		if raw.Flapping == nil {
			return fmt.Errorf("origin_flapping without \"flapping\"")
		}
		e.Origin, e.Flapping = raw.Origin, *raw.Flapping
	case KindPathPartitionSuspected:
		if raw.Suspected == nil {
			return fmt.Errorf("path_partition_suspected without \"suspected\"")
		}
		e.Origin, e.Group, e.Rounds, e.Suspected = raw.Origin, raw.Group, raw.Rounds, *raw.Suspected
	case KindDrillStarted:
		e.Level, e.Seconds = raw.Level, raw.Seconds
	case KindDrillEnded:
		e.Level, e.End = raw.Level, raw.End
	case KindFailoverTimed:
		if len(raw.Report) == 0 {
			return fmt.Errorf("failover_timed without \"report\"")
		}
		e.Report = string(raw.Report)
	case KindRampStep:
		from, _ := raw.From.(float64)
		e.Level, e.FromLevel, e.Weight = raw.Level, int(from), raw.Weight
	default:
		return fmt.Errorf("event kind %q is unknown", raw.Kind)
	}
	return nil
}

// String is a one-line human form, used in logs.
func (e Event) String() string {
	switch e.Kind {
	case KindOriginState:
		return fmt.Sprintf("origin %s: %s -> %s", e.Origin, e.From, e.To)
	case KindLevelSwitched:
		return fmt.Sprintf("level %d -> %d (%s)", e.FromLevel, e.ToLevel, e.Reason)
	case KindFailbackAvailable:
		return fmt.Sprintf("level %d is healthy again (manual failback available)", e.Level)
	case KindAllLevelsUnhealthy:
		return fmt.Sprintf("all levels unhealthy; staying on level %d", e.Level)
	case KindOriginFlapping:
		if e.Flapping {
			return fmt.Sprintf("origin %s is flapping: held unhealthy", e.Origin)
		}
		return fmt.Sprintf("origin %s is stable again: no longer held", e.Origin)
	case KindPathPartitionSuspected:
		if e.Suspected {
			return fmt.Sprintf("origin %s: path partition suspected: every voter of %s voted down for %d rounds while the others voted up", e.Origin, e.Group, e.Rounds)
		}
		return fmt.Sprintf("origin %s: path partition of %s no longer suspected (after %d rounds)", e.Origin, e.Group, e.Rounds)
	case KindDrillStarted:
		return fmt.Sprintf("drill of level %d started for %ds", e.Level, e.Seconds)
	case KindDrillEnded:
		return fmt.Sprintf("drill of level %d ended (%s)", e.Level, e.End)
	case KindFailoverTimed:
		return FailoverTimedLine([]byte(e.Report))
	case KindRampStep:
		if e.Weight >= 100 {
			return fmt.Sprintf("failback ramp over: all new requests on level %d", e.Level)
		}
		return fmt.Sprintf("failback ramp: %d%% of new requests to level %d, the rest on level %d", e.Weight, e.Level, e.FromLevel)
	}
	return e.Kind.String()
}

// FailoverTimedLine is the one-line form of a failover_timed event's
// report: its levels and the figures it has (api.Event says the same).
func FailoverTimedLine(report []byte) string {
	var r struct {
		From    int      `json:"from_level"`
		To      int      `json:"to_level"`
		Detect  *float64 `json:"detect_seconds"`
		Publish *float64 `json:"publish_seconds"`
		Edge    *float64 `json:"edge_seconds"`
		Nodes   []struct {
			Reported bool `json:"reported"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(report, &r); err != nil {
		return "failover timed (unreadable report)"
	}
	reported := 0
	for _, n := range r.Nodes {
		if n.Reported {
			reported++
		}
	}
	return fmt.Sprintf("failover %d -> %d timed: detect %s, publish %s, edges %s (%d of %d nodes reported)",
		r.From, r.To, secondsText(r.Detect), secondsText(r.Publish), secondsText(r.Edge), reported, len(r.Nodes))
}

func secondsText(s *float64) string {
	if s == nil {
		return "unknown"
	}
	return fmt.Sprintf("%.3fs", *s)
}
