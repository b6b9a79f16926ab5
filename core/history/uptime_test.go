package history_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/history"
)

func TestUptimePercent(t *testing.T) {
	for _, c := range []struct {
		w    history.Window
		want float64
		ok   bool
	}{
		{history.Window{}, 0, false},
		{history.Window{Up: 3}, 100, true},
		{history.Window{Down: 3}, 0, true},
		{history.Window{Up: 199, Down: 1}, 99.5, true},
	} {
		got, ok := c.w.Uptime()
		if got != c.want || ok != c.ok {
			t.Errorf("%+v: %v %v, want %v %v", c.w, got, ok, c.want, c.ok)
		}
	}
}

// The uptime windows: the 1 h window is the current 10-minute bucket and
// the 5 before it, 24 h the current hour and 23 before, 7 d the current
// 6 hours and 27 before. Unsettled rounds count as neither up nor down.
func TestUptimeWindows(t *testing.T) {
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC) // on every tier's boundary
	type round struct {
		at time.Duration
		v  history.Verdict
	}
	cases := []struct {
		name   string
		rounds []round
		now    time.Duration
		want   [3]history.Window
	}{
		{"one of each", []round{{0, history.Up}, {time.Minute, history.Down}, {2 * time.Minute, history.Unsettled}}, 3 * time.Minute,
			[3]history.Window{{1, 1}, {1, 1}, {1, 1}}},
		{"an hour later the 1h window is empty", []round{{0, history.Up}, {time.Minute, history.Down}}, time.Hour,
			[3]history.Window{{0, 0}, {1, 1}, {1, 1}}},
		{"50 to 60 minutes are kept in 1h", []round{{0, history.Down}, {55 * time.Minute, history.Up}}, 59 * time.Minute,
			[3]history.Window{{1, 1}, {1, 1}, {1, 1}}},
		{"the bucket 60 minutes back leaves 1h", []round{{0, history.Down}, {55 * time.Minute, history.Up}}, 61 * time.Minute,
			[3]history.Window{{1, 0}, {1, 1}, {1, 1}}},
		{"a day later only 7d", []round{{0, history.Down}, {time.Hour, history.Up}}, 25 * time.Hour,
			[3]history.Window{{0, 0}, {0, 0}, {1, 1}}},
		{"a week later nothing", []round{{0, history.Down}}, 7 * 24 * time.Hour,
			[3]history.Window{}},
		{"a gap empties the buckets it skipped", []round{{0, history.Down}, {3 * time.Hour, history.Up}, {3*time.Hour + time.Minute, history.Up}}, 3*time.Hour + 2*time.Minute,
			[3]history.Window{{2, 0}, {2, 1}, {2, 1}}},
		{"a round from before the kept window is dropped", []round{{8 * 24 * time.Hour, history.Up}, {0, history.Down}}, 8 * 24 * time.Hour,
			[3]history.Window{{1, 0}, {1, 0}, {1, 0}}},
		{"a clock step back lands in its bucket", []round{{30 * time.Minute, history.Up}, {5 * time.Minute, history.Down}}, 31 * time.Minute,
			[3]history.Window{{1, 1}, {1, 1}, {1, 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := open(t, filepath.Join(t.TempDir(), "history.ring"), history.Options{Origins: 1})
			ks := keys(1)
			slots := sync(t, r, ks)
			for _, rd := range c.rounds {
				if _, err := r.Record(base.Add(rd.at), []history.Obs{{Slot: slots[0], Verdict: rd.v}}); err != nil {
					t.Fatal(err)
				}
			}
			o := read(t, r, slots[0], ks[0], base.Add(c.now))
			if o.Windows != c.want {
				t.Errorf("windows %+v, want %+v", o.Windows, c.want)
			}
		})
	}
}

// Every round of a busy 10 minutes fits the counters; they saturate
// rather than wrap.
func TestUptimeCountersSaturate(t *testing.T) {
	r, _ := open(t, filepath.Join(t.TempDir(), "history.ring"), history.Options{Origins: 1, Rounds: 1})
	ks := keys(1)
	slots := sync(t, r, ks)
	for range 70000 {
		if _, err := r.Record(t0, []history.Obs{{Slot: slots[0], Verdict: history.Up}}); err != nil {
			t.Fatal(err)
		}
	}
	o := read(t, r, slots[0], ks[0], t0)
	if o.Windows[0].Up != 0xffff {
		t.Errorf("1h up = %d, want it saturated at 65535", o.Windows[0].Up)
	}
}
