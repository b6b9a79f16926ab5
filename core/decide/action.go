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
		return nil, fmt.Errorf("site %s has no level %d (its levels are %s)", spec.Name, level, levelList(spec.Levels))
	}
	var events []Event
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
	return []Event{{Kind: KindOriginState, Origin: origin, From: from, To: Disabled}}, nil
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
	return []Event{{Kind: KindOriginState, Origin: origin, From: Disabled, To: Unknown}}, nil
}

func levelList(levels []int) string {
	parts := make([]string, len(levels))
	for i, l := range levels {
		parts[i] = strconv.Itoa(l)
	}
	return strings.Join(parts, ", ")
}
