package decide

import (
	"fmt"
	"slices"

	"github.com/vigilcdn/vigil/core/vote"
)

// Health is an origin's state or a level's health.
type Health uint8

const (
	// Unknown: not yet judged (or re-enabled).
	Unknown Health = iota
	// Healthy: healthy_threshold good rounds in a row (or, for a level,
	// some enabled origin is healthy).
	Healthy
	// Unhealthy: unhealthy_threshold failed rounds in a row (or, for a
	// level, every enabled origin is unhealthy, or it has none).
	Unhealthy
	// Disabled: an origin taken out by configuration or an operator.
	Disabled
)

var healthNames = [...]string{"unknown", "healthy", "unhealthy", "disabled"}

// String returns the spelling used in output and the API.
func (h Health) String() string {
	if int(h) < len(healthNames) {
		return healthNames[h]
	}
	return fmt.Sprintf("health(%d)", h)
}

// ParseHealth reads a spelling produced by String.
func ParseHealth(s string) (Health, error) {
	for i, n := range healthNames {
		if n == s {
			return Health(i), nil
		}
	}
	return Unknown, fmt.Errorf("health %q is not one of unknown, healthy, unhealthy, disabled", s)
}

// Failback is a site's failback setting.
type Failback uint8

const (
	// FailbackAuto switches back to a healthy higher level by itself.
	FailbackAuto Failback = iota
	// FailbackManual only announces that a higher level is healthy again.
	FailbackManual
)

// String returns the configuration spelling: auto or manual.
func (f Failback) String() string {
	if f == FailbackManual {
		return "manual"
	}
	return "auto"
}

// ParseFailback reads the configuration spelling.
func ParseFailback(s string) (Failback, error) {
	switch s {
	case "auto":
		return FailbackAuto, nil
	case "manual":
		return FailbackManual, nil
	}
	return FailbackAuto, fmt.Errorf("failback %q is not one of \"auto\", \"manual\"", s)
}

// OriginSpec is the static part of one origin.
type OriginSpec struct {
	Name string
	// Level is the origin's level number (>= 1).
	Level int
	// LevelIndex is the position of Level in the site's Levels.
	LevelIndex int
}

// SiteSpec is the static description of a site that the core needs.
type SiteSpec struct {
	Name string
	// Levels are the distinct level numbers of the site's origins,
	// ascending. Levels[0] is the top level.
	Levels   []int
	Origins  []OriginSpec
	Failback Failback
	// HealthyThreshold and UnhealthyThreshold are >= 1.
	HealthyThreshold   int32
	UnhealthyThreshold int32
	// HealthCheck is false when the site's health check is disabled.
	HealthCheck bool
	// AntiFlap is the site's anti-flap rules (antiflap.go); nil when none
	// is configured.
	AntiFlap *AntiFlapSpec
}

// NewSiteSpec builds a spec, computing Levels and each origin's LevelIndex.
func NewSiteSpec(name string, origins []OriginSpec, failback Failback, healthy, unhealthy int32, healthCheck bool) *SiteSpec {
	s := &SiteSpec{Name: name, Failback: failback, HealthyThreshold: healthy, UnhealthyThreshold: unhealthy, HealthCheck: healthCheck}
	s.Origins = append([]OriginSpec(nil), origins...)
	for _, o := range s.Origins {
		if s.levelIndex(o.Level) < 0 {
			s.Levels = append(s.Levels, o.Level)
		}
	}
	slices.Sort(s.Levels)
	for i := range s.Origins {
		s.Origins[i].LevelIndex = s.levelIndex(s.Origins[i].Level)
	}
	return s
}

// levelIndex returns the index of level number n in Levels, or -1.
func (s *SiteSpec) levelIndex(n int) int {
	for i, l := range s.Levels {
		if l == n {
			return i
		}
	}
	return -1
}

// LevelIndex returns the index of level number n in Levels, or -1.
func (s *SiteSpec) LevelIndex(n int) int { return s.levelIndex(n) }

// OriginIndex returns the index of the named origin, or -1.
func (s *SiteSpec) OriginIndex(name string) int {
	for i, o := range s.Origins {
		if o.Name == name {
			return i
		}
	}
	return -1
}

// TopLevel is the lowest level number.
func (s *SiteSpec) TopLevel() int { return s.Levels[0] }

// OriginState is an origin's health and its counters.
type OriginState struct {
	State     Health
	Failures  int32 // consecutive down verdicts
	Successes int32 // consecutive up verdicts
}

// SiteState is everything the core remembers about a site between rounds.
type SiteState struct {
	// Level is the current level number.
	Level int
	// ManualHold is set by a manual switch to a level other than the top
	// level: failback is manual until a manual switch to the top level.
	ManualHold bool
	// Origins has one entry per SiteSpec.Origins entry.
	Origins []OriginState
	// Baseline is each level's health at the end of the site's last probed
	// round, by level index; nil before the first round (all unknown).
	Baseline []Health
	// Alerted is set once all_levels_unhealthy has been emitted and cleared
	// when a round ends with some level not unhealthy.
	Alerted bool
	// AntiFlap is the anti-flap rules' memory; nil while the site has none
	// of them (one pointer per site, nothing per origin).
	AntiFlap *AntiFlapState
}

// NewSiteState is the state of a site never seen before: on the top level,
// every enabled origin unknown, every disabled one disabled.
func NewSiteState(spec *SiteSpec, enabled []bool) *SiteState {
	st := &SiteState{Level: spec.TopLevel(), Origins: make([]OriginState, len(spec.Origins))}
	for i := range st.Origins {
		if enabled != nil && !enabled[i] {
			st.Origins[i].State = Disabled
		}
	}
	return st
}

// EffectiveFailback is the site's failback setting, or manual while a
// manual hold is on.
func EffectiveFailback(spec *SiteSpec, st *SiteState) Failback {
	if st.ManualHold {
		return FailbackManual
	}
	return spec.Failback
}

// EnabledOrigins counts the origins that are not disabled.
func (st *SiteState) EnabledOrigins() int {
	n := 0
	for _, o := range st.Origins {
		if o.State != Disabled {
			n++
		}
	}
	return n
}

// Verdict re-exports vote.Verdict for callers of this package.
type Verdict = vote.Verdict
