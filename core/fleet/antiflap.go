package fleet

import (
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
)

// clock is the anti-flap rules' time (docs/antiflap.md). The decision core
// counts in ticks:
//
//   - the daemon's ticks are wall-clock Unix milliseconds, and a duration
//     of n rounds (rounded up) is n x round_interval less half a
//     round_interval, so that a round that starts a little early (the
//     ticker's jitter) still counts as the n-th;
//   - `vigil simulate`'s ticks are the timeline's round index, and a
//     duration is n rounds exactly, so that a replay is deterministic.
type clock struct {
	rounds   bool
	interval time.Duration
}

// ticks converts a configured duration; 0 stays 0 (the rule is off).
func (c clock) ticks(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	iv := c.interval
	if iv <= 0 {
		iv = config.DefaultRoundInterval
	}
	n := (d + iv - 1) / iv
	if c.rounds {
		return int64(n)
	}
	return (time.Duration(n)*iv - iv/2).Milliseconds()
}

// Rounds is a configured duration in whole rounds of round_interval,
// rounded up: how `vigil simulate` counts it.
func Rounds(d, interval time.Duration) int64 {
	return clock{rounds: true, interval: interval}.ticks(d)
}

// antiFlapSpec is the decision core's form of a site's anti-flap settings.
func (c clock) antiFlapSpec(af *config.AntiFlap) *decide.AntiFlapSpec {
	if af == nil {
		return nil
	}
	s := &decide.AntiFlapSpec{Quarantine: c.ticks(af.Quarantine), Dwell: c.ticks(af.FailbackDwell)}
	if af.FlapChanges > 0 && af.FlapWithin > 0 {
		s.FlapChanges, s.FlapWithin = int32(af.FlapChanges), c.ticks(af.FlapWithin)
	}
	if r := af.Ramp; r != nil && len(r.Steps) >= 2 && r.Interval > 0 {
		s.Ramp = &decide.RampSpec{Steps: append([]int(nil), r.Steps...), Interval: c.ticks(r.Interval)}
	}
	if *s == (decide.AntiFlapSpec{}) {
		return nil
	}
	return s
}

// now is the time of the round being applied (or of an action) in the
// fleet's ticks: on the round clock, the number of rounds applied, a
// confirmation round not counted (it takes no round time).
func (f *Fleet) now() int64 {
	if f.clock.rounds {
		return f.ticks
	}
	if f.Now != nil {
		return f.Now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// RoundClock reports whether the fleet counts time in rounds (`vigil
// simulate`) rather than wall-clock milliseconds.
func (f *Fleet) RoundClock() bool { return f.clock.rounds }

// TickTime is the wall-clock time of a tick of a fleet that does not count
// in rounds; the zero time for tick 0.
func TickTime(t int64) time.Time {
	if t == 0 {
		return time.Time{}
	}
	return time.UnixMilli(t).UTC()
}

// TimeTick is the inverse of TickTime.
func TimeTick(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
