package decide_test

import (
	"testing"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
)

// FuzzAntiFlap drives a random site with random anti-flap rules through
// random rounds (one tick each, sometimes skipping ticks) and actions, and
// beside it the same site without the rules, and checks the invariants of
// docs/antiflap.md:
//
//   - a quarantined origin is never healthy before its quarantine ends: no
//     origin turns healthy less than Quarantine ticks after it last turned
//     unhealthy;
//   - a flapping origin is unhealthy while held;
//   - failover is never delayed (not by the dwell, nor by anything else):
//     a round that ends with the site's level unhealthy moves the site,
//     unless every level is unhealthy;
//   - the counters are exactly those of a rule-free twin fed the same
//     verdicts (good rounds still count);
//   - the rules never turn an origin healthy that the thresholds alone do
//     not judge healthy;
//   - the failback ramp (docs/antiflap.md#failback-ramp): a ramp in progress
//     has a weight from 1 to 99 (with the rest, 100 for the two levels), a
//     level left that exists, is not the current level and is not
//     unhealthy; no ramp step (a higher weight, or the end at 100 on the
//     same level) without the recovering level healthy, unless the level
//     left failed; a failure of the recovering level always ends the
//     ramp; and no ramp outlives the site's probing (two enabled origins).
func FuzzAntiFlap(f *testing.F) {
	f.Add([]byte{3, 1, 1, 2, 3, 2, 2, 1, 0, 1, 2, 0, 2, 2, 2, 1, 1, 1, 7, 9, 5, 6, 7, 8})
	f.Add([]byte{4, 1, 0, 4, 2, 5, 3, 0, 3, 2, 1, 0, 64, 1, 2, 3, 200, 231, 1, 2, 241, 2, 1})
	// A ramp (steps 10, 40, 100 every 2 ticks): failover, failback, steps,
	// a failure during the ramp, a second ramp and a manual switch.
	// (4: both up, 5: a down, 10: b down, 240: a switch to level 1.)
	f.Add([]byte{3, 0, 0, 5, 10, 0, 4, 5, 4, 4, 4, 4, 5, 4, 4, 10, 4, 240, 4, 5, 4, 4, 4, 4, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 6 {
			return
		}
		n := 2 + int(data[0])%3
		healthy, unhealthy := int32(1+data[1]%2), int32(1+data[2]%2)
		af := &decide.AntiFlapSpec{Quarantine: int64(data[3] % 5), Dwell: int64(data[4] % 5)}
		if c := int32(data[5] % 4); c > 0 {
			af.FlapChanges, af.FlapWithin = c, int64(1+data[5]/4%5)
		}
		// The ramp from the same bytes, so that the seeds keep their meaning.
		switch data[4] / 5 % 3 {
		case 1:
			af.Ramp = &decide.RampSpec{Steps: []int{50, 100}, Interval: int64(1 + data[3]/5%3)}
		case 2:
			af.Ramp = &decide.RampSpec{Steps: []int{10, 40, 100}, Interval: int64(1 + data[3]/5%3)}
		}
		data = data[6:]
		origins := make([]decide.OriginSpec, n)
		for i := range origins {
			origins[i] = decide.OriginSpec{Name: string(rune('a' + i)), Level: 1 + i%3}
		}
		spec := decide.NewSiteSpec("s", origins, decide.FailbackAuto, healthy, unhealthy, true)
		spec.AntiFlap = af
		plain := decide.NewSiteSpec("s", origins, decide.FailbackAuto, healthy, unhealthy, true)
		st, twin := decide.NewSiteState(spec, nil), decide.NewSiteState(plain, nil)
		levels, tlevels := make([]decide.Health, len(spec.Levels)), make([]decide.Health, len(spec.Levels))
		verdicts := make([]vote.Verdict, n)
		lastDown := make([]int64, n) // when each origin last turned unhealthy; -1 for never
		for i := range lastDown {
			lastDown[i] = -1
		}
		now := int64(0)
		for _, op := range data {
			switch {
			case op >= 240: // a manual switch, to both (it ends any ramp)
				lvl := int(op-240)%3 + 1
				if _, err := decide.Switch(spec, st, lvl); err == nil {
					_, _ = decide.Switch(plain, twin, lvl)
				}
			case op >= 224: // disable / enable, to both
				name := string(rune('a' + int(op)%n))
				if op >= 232 {
					_, _ = decide.Disable(spec, st, name)
					_, _ = decide.Disable(plain, twin, name)
				} else {
					_, _ = decide.Enable(spec, st, name)
					_, _ = decide.Enable(plain, twin, name)
				}
				lastDown[int(op)%n] = -1
			default:
				now += 1 + int64(op>>6) // sometimes ticks pass without a round
				for i := range verdicts {
					verdicts[i] = vote.Verdict((int(op) >> (2 * (i % 3))) % 3)
				}
				from := st.Level
				cur := spec.LevelIndex(st.Level)
				before, ramping := decide.RampOf(spec, st)
				events := decide.RoundAt(spec, st, verdicts, levels, nil, now)
				after, ramped := decide.RampOf(spec, st)
				if ramped {
					fi := spec.LevelIndex(after.From)
					if after.Weight < 1 || after.Weight > 99 || fi < 0 || after.From == st.Level {
						t.Fatalf("ramp %+v on level %d: not a split of 100 between two levels", after, st.Level)
					}
					if levels[fi] == decide.Unhealthy || levels[spec.LevelIndex(st.Level)] == decide.Unhealthy {
						t.Fatalf("ramp %+v on level %d goes on with levels %v", after, st.Level, levels)
					}
				}
				if ramping && cur >= 0 && levels[cur] == decide.Unhealthy && ramped && st.Level == from {
					t.Fatalf("the recovering level %d failed and the ramp %+v goes on", from, after)
				}
				if ramping && st.Level == from {
					stepped := (ramped && after.From == before.From && after.Weight > before.Weight) || !ramped
					fromFailed := levels[spec.LevelIndex(before.From)] == decide.Unhealthy
					if stepped && levels[cur] != decide.Healthy && !fromFailed {
						t.Fatalf("a ramp step (%+v to %+v, ramping %v) with the recovering level %s", before, after, ramped, levels[cur])
					}
				}
				decide.Round(plain, twin, verdicts, tlevels, nil)
				for _, ev := range events {
					if ev.Kind != decide.KindOriginState {
						continue
					}
					i := spec.OriginIndex(ev.Origin)
					if ev.To == decide.Unhealthy {
						lastDown[i] = now
					}
					if ev.To == decide.Healthy && lastDown[i] >= 0 && af.Quarantine > 0 && now < lastDown[i]+af.Quarantine {
						t.Fatalf("origin %s healthy at %d, quarantined since %d for %d", ev.Origin, now, lastDown[i], af.Quarantine)
					}
				}
				for i, x := range st.AntiFlap.Origins {
					if x.Held && st.Origins[i].State == decide.Healthy {
						t.Fatalf("origin %d healthy while held as flapping", i)
					}
					if st.Origins[i].State == decide.Healthy && x.Raw != decide.Healthy {
						t.Fatalf("origin %d shown healthy, judged %s", i, x.Raw)
					}
					if st.Origins[i].State != decide.Disabled && (st.Origins[i].Failures != twin.Origins[i].Failures || st.Origins[i].Successes != twin.Origins[i].Successes) {
						t.Fatalf("origin %d: the counters differ from the rule-free twin's", i)
					}
				}
				// Failover is never delayed: if the level the site was on is
				// unhealthy after the round, the site does not stay there
				// unless every level is unhealthy.
				if cur >= 0 && levels[cur] == decide.Unhealthy && st.Level == from {
					for _, h := range levels {
						if h != decide.Unhealthy {
							t.Fatalf("stayed on unhealthy level %d with levels %v", from, levels)
						}
					}
				}
			}
			if spec.LevelIndex(st.Level) < 0 {
				t.Fatalf("current level %d does not exist", st.Level)
			}
			if r, ok := decide.RampOf(spec, st); ok && (st.EnabledOrigins() < 2 || r.From == st.Level) {
				t.Fatalf("ramp %+v on level %d with %d enabled origins (no round would end it)", r, st.Level, st.EnabledOrigins())
			}
		}
	})
}
