package api

import (
	"encoding/json"
	"fmt"
)

// EventKind names what an event says happened, spelled as the API and
// `vigil simulate` spell it.
type EventKind string

// The kinds of event. Which fields of an Event are meaningful depends on
// its Kind.
const (
	// KindOriginState: an origin's state changed (Origin, From, To).
	KindOriginState EventKind = "origin_state"
	// KindLevelSwitched: the current level changed (FromLevel, ToLevel,
	// Reason).
	KindLevelSwitched EventKind = "level_switched"
	// KindFailbackAvailable: with manual failback, a higher level is
	// healthy again (Level).
	KindFailbackAvailable EventKind = "failback_available"
	// KindAllLevelsUnhealthy: every level is unhealthy; the site stays on
	// Level.
	KindAllLevelsUnhealthy EventKind = "all_levels_unhealthy"
	// KindOriginFlapping: an origin's flapping hold began (Flapping true)
	// or ended (Flapping false); see docs/antiflap.md.
	KindOriginFlapping EventKind = "origin_flapping"
	// KindPathPartitionSuspected: every voter of one group voted an
	// origin down for Rounds rounds in a row while the others voted it up
	// (Suspected true), or that suspicion ended (Suspected false); see
	// docs/partition.md. It never switches anything.
	KindPathPartitionSuspected EventKind = "path_partition_suspected"
	// KindDrillStarted: an operator started a failover drill of Level for
	// Seconds (docs/drills.md); the journal line's Actor says who.
	KindDrillStarted EventKind = "drill_started"
	// KindDrillEnded: the drill of Level ended; End says why (the
	// DrillEnd* values).
	KindDrillEnded EventKind = "drill_ended"
	// KindFailoverTimed: the time a failover took, from its first failed
	// verdict to the nodes' edges (Failover); journaled once the nodes
	// reported (docs/failover-time.md).
	KindFailoverTimed EventKind = "failover_timed"
	// KindRampStep: a failback ramp moved (docs/antiflap.md#failback-ramp):
	// Level, the recovering level, now gets Weight per cent of new
	// requests and FromLevel the rest; Weight 100 ends the ramp. Its
	// JSON names FromLevel "from".
	KindRampStep EventKind = "ramp_step"
)

// EventKinds lists every kind, in the decision core's order.
var EventKinds = []EventKind{KindOriginState, KindLevelSwitched, KindFailbackAvailable, KindAllLevelsUnhealthy, KindOriginFlapping, KindPathPartitionSuspected, KindDrillStarted, KindDrillEnded, KindFailoverTimed, KindRampStep}

// String returns the kind's spelling.
func (k EventKind) String() string { return string(k) }

// The reasons of a KindLevelSwitched event.
const (
	// ReasonFailover: the current level was unhealthy.
	ReasonFailover = "failover"
	// ReasonFailback: automatic failback to a healthy higher level.
	ReasonFailback = "failback"
	// ReasonManual: an operator switched.
	ReasonManual = "manual"
	// ReasonConfig: the configuration no longer has the current level;
	// the site moved to its top level.
	ReasonConfig = "config"
)

// The states of an origin, in an OriginView and in a KindOriginState
// event.
const (
	OriginUnknown   = "unknown"
	OriginHealthy   = "healthy"
	OriginUnhealthy = "unhealthy"
	OriginDisabled  = "disabled"
)

// Event is one thing that happened to a site, as the API and the journal
// show it (the shape of docs/simulate.md, "The output"). Which fields are
// meaningful depends on Kind.
type Event struct {
	Kind EventKind
	// Origin names the origin of a KindOriginState, KindOriginFlapping or
	// KindPathPartitionSuspected.
	Origin string
	// From and To are the origin states of a KindOriginState (see the
	// Origin* constants).
	From, To string
	// FromLevel, ToLevel and Reason (see the Reason* constants) describe
	// a KindLevelSwitched.
	FromLevel, ToLevel int
	Reason             string
	// Level is the level of a KindFailbackAvailable or
	// KindAllLevelsUnhealthy.
	Level int
	// Flapping says whether a KindOriginFlapping began or ended.
	Flapping bool
	// Group, Rounds and Suspected describe a KindPathPartitionSuspected:
	// the voter group ("node/pop=eu"), the rounds in a row it voted alone
	// against the others, and whether the suspicion began.
	Group     string
	Rounds    int
	Suspected bool
	// Seconds is a KindDrillStarted's duration; End is why a
	// KindDrillEnded ended (DrillEnd*). Both use Level too.
	Seconds int
	End     string
	// Drill marks an event made while a drill ran on the site, or during
	// its way back (written "drill": true, only when set).
	Drill bool
	// Failover is a KindFailoverTimed's report (written "report").
	Failover *FailoverReport
	// Weight is a KindRampStep's per cent of new requests for Level.
	Weight int
}

// MarshalJSON writes the event in the shape of docs/simulate.md ("The
// output"): only the fields its kind uses, then "drill": true when Drill
// is set.
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
		}{string(e.Kind), e.Origin, e.From, e.To})
	case KindLevelSwitched:
		return json.Marshal(struct {
			Kind   string `json:"kind"`
			From   int    `json:"from"`
			To     int    `json:"to"`
			Reason string `json:"reason"`
		}{string(e.Kind), e.FromLevel, e.ToLevel, e.Reason})
	case KindFailbackAvailable, KindAllLevelsUnhealthy:
		return json.Marshal(struct {
			Kind  string `json:"kind"`
			Level int    `json:"level"`
		}{string(e.Kind), e.Level})
	case KindOriginFlapping:
		return json.Marshal(struct {
			Kind     string `json:"kind"`
			Origin   string `json:"origin"`
			Flapping bool   `json:"flapping"`
		}{string(e.Kind), e.Origin, e.Flapping})
	case KindPathPartitionSuspected:
		return json.Marshal(struct {
			Kind      string `json:"kind"`
			Origin    string `json:"origin"`
			Group     string `json:"group"`
			Rounds    int    `json:"rounds"`
			Suspected bool   `json:"suspected"`
		}{string(e.Kind), e.Origin, e.Group, e.Rounds, e.Suspected})
	case KindDrillStarted:
		return json.Marshal(struct {
			Kind    string `json:"kind"`
			Level   int    `json:"level"`
			Seconds int    `json:"seconds"`
		}{string(e.Kind), e.Level, e.Seconds})
	case KindDrillEnded:
		return json.Marshal(struct {
			Kind  string `json:"kind"`
			Level int    `json:"level"`
			End   string `json:"end"`
		}{string(e.Kind), e.Level, e.End})
	case KindFailoverTimed:
		return json.Marshal(struct {
			Kind   string          `json:"kind"`
			Report *FailoverReport `json:"report"`
		}{string(e.Kind), e.Failover})
	case KindRampStep:
		return json.Marshal(struct {
			Kind   string `json:"kind"`
			Level  int    `json:"level"`
			From   int    `json:"from"`
			Weight int    `json:"weight"`
		}{string(e.Kind), e.Level, e.FromLevel, e.Weight})
	}
	return nil, fmt.Errorf("event kind %q has no JSON form", string(e.Kind))
}

// UnmarshalJSON reads the shape written by MarshalJSON. An unknown kind,
// origin state or switch reason is an error.
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
		Suspected *bool           `json:"suspected"`
		Group     string          `json:"group"`
		Rounds    int             `json:"rounds"`
		Seconds   int             `json:"seconds"`
		End       string          `json:"end"`
		Drill     bool            `json:"drill"`
		Report    *FailoverReport `json:"report"`
		Weight    int             `json:"weight"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*e = Event{Kind: EventKind(raw.Kind), Drill: raw.Drill}
	switch e.Kind {
	case KindOriginState:
		from, _ := raw.From.(string)
		to, _ := raw.To.(string)
		for _, s := range [...]string{from, to} {
			if !isOriginState(s) {
				return fmt.Errorf("health %q is not one of unknown, healthy, unhealthy, disabled", s)
			}
		}
		e.Origin, e.From, e.To = raw.Origin, from, to
	case KindLevelSwitched:
		from, _ := raw.From.(float64)
		to, _ := raw.To.(float64)
		e.FromLevel, e.ToLevel = int(from), int(to)
		switch raw.Reason {
		case ReasonFailover, ReasonFailback, ReasonManual, ReasonConfig:
			e.Reason = raw.Reason
		default:
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
		if raw.Report == nil {
			return fmt.Errorf("failover_timed without \"report\"")
		}
		e.Failover = raw.Report
	case KindRampStep:
		from, _ := raw.From.(float64)
		e.Level, e.FromLevel, e.Weight = raw.Level, int(from), raw.Weight
	default:
		*e = Event{}
		return fmt.Errorf("event kind %q is unknown", raw.Kind)
	}
	return nil
}

func isOriginState(s string) bool {
	switch s {
	case OriginUnknown, OriginHealthy, OriginUnhealthy, OriginDisabled:
		return true
	}
	return false
}

// String is a one-line human form, as `vigil events` prints it.
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
		return e.Failover.line()
	case KindRampStep:
		if e.Weight >= 100 {
			return fmt.Sprintf("failback ramp over: all new requests on level %d", e.Level)
		}
		return fmt.Sprintf("failback ramp: %d%% of new requests to level %d, the rest on level %d", e.Weight, e.Level, e.FromLevel)
	}
	return string(e.Kind)
}
