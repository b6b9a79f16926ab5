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
)

var kindNames = [...]string{"", "origin_state", "level_switched", "failback_available", "all_levels_unhealthy", "origin_flapping"}

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
}

// MarshalJSON writes the event in the shape of shared/spec/simulate.md.
func (e Event) MarshalJSON() ([]byte, error) {
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
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*e = Event{}
	for i, n := range kindNames {
		if n == raw.Kind && i != 0 {
			e.Kind = EventKind(i)
		}
	}
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
	}
	return e.Kind.String()
}
