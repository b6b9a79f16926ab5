package decide

import (
	"fmt"
	"strconv"
	"strings"
)

// Switch is the operator's manual switch of the site to level number level.
// It emits level_switched (reason manual) unless level is already current,
// and either way sets the manual hold (level is not the top level) or
// clears it (level is the top level). No evaluation follows.
func Switch(spec *SiteSpec, st *SiteState, level int) ([]Event, error) {
	if spec.levelIndex(level) < 0 {
		return nil, &UnknownLevelError{Site: spec.Name, Level: level, Levels: spec.Levels}
	}
	var events []Event
	if st.AntiFlap != nil {
		// A new value rather than a write into the old one, which a caller
		// may keep to undo the action.
		x := *st.AntiFlap
		x.Ramp = nil // a manual switch ends a failback ramp
		if level != st.Level {
			x.LevelSince = 0 // a manual switch needs no dwell
		}
		st.AntiFlap = &x
	}
	if level != st.Level {
		events = append(events, Event{Kind: KindLevelSwitched, FromLevel: st.Level, ToLevel: level, Reason: ReasonManual})
		st.Level = level
	}
	st.ManualHold = level != spec.TopLevel()
	return events, nil
}

// Disable takes an origin out: state disabled, counters reset. Nothing
// happens if it is already disabled.
func Disable(spec *SiteSpec, st *SiteState, origin string) ([]Event, error) {
	i := spec.OriginIndex(origin)
	if i < 0 {
		return nil, fmt.Errorf("site %s has no origin %s", spec.Name, origin)
	}
	o := &st.Origins[i]
	if o.State == Disabled {
		return nil, nil
	}
	from := o.State
	*o = OriginState{State: Disabled}
	rampPaused(st)
	return actionAntiFlap(spec, st, i, []Event{{Kind: KindOriginState, Origin: origin, From: from, To: Disabled}}), nil
}

// Enable puts a disabled origin back: state unknown, counters at 0. Nothing
// happens if it is already enabled.
func Enable(spec *SiteSpec, st *SiteState, origin string) ([]Event, error) {
	i := spec.OriginIndex(origin)
	if i < 0 {
		return nil, fmt.Errorf("site %s has no origin %s", spec.Name, origin)
	}
	o := &st.Origins[i]
	if o.State != Disabled {
		return nil, nil
	}
	*o = OriginState{State: Unknown}
	return actionAntiFlap(spec, st, i, []Event{{Kind: KindOriginState, Origin: origin, From: Disabled, To: Unknown}}), nil
}

func levelList(levels []int) string {
	parts := make([]string, len(levels))
	for i, l := range levels {
		parts[i] = strconv.Itoa(l)
	}
	return strings.Join(parts, ", ")
}

// UnknownLevelError refuses a switch to a level the site does not have.
type UnknownLevelError struct {
	Site   string
	Level  int
	Levels []int
}

func (e *UnknownLevelError) Error() string {
	return fmt.Sprintf("site %s has no level %d", e.Site, e.Level)
}

// Hint lists the levels the site has, for messages that have room for it.
func (e *UnknownLevelError) Hint() string {
	return "its levels are " + levelList(e.Levels)
}
