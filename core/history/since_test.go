package history_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/history"
)

// TestSince: an origin says when its data begins, so that an uptime over
// a window longer than that says how much it covers ("31 min of data").
// Rounds every 30 s into a ring of 4 rounds, from `first` to `last`
// minutes after a time on every tier's boundary, read at `last`.
func TestSince(t *testing.T) {
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name        string
		first, last time.Duration
		rounds      int
		want        time.Duration // after base
	}{
		{"the ring not full: its first round", 3 * time.Minute, 4 * time.Minute, 10, 3 * time.Minute},
		{"a full ring, 31 min of data: the 10-minute bucket it began in", 9 * time.Minute, 40 * time.Minute, 4, 0},
		{"a full ring, data began mid-hour", 25 * time.Minute, 56 * time.Minute, 4, 20 * time.Minute},
		{"two hours of data: the hour it began in", 70 * time.Minute, 190 * time.Minute, 4, time.Hour},
		{"two days of data: the 6 hours it began in", 7 * time.Hour, 55 * time.Hour, 4, 6 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := open(t, filepath.Join(t.TempDir(), "history.ring"), history.Options{Origins: 1, Rounds: c.rounds})
			ks := keys(1)
			slots := sync(t, r, ks)
			step := 30 * time.Second
			if c.last-c.first > 6*time.Hour {
				step = 10 * time.Minute // fewer writes, same buckets
			}
			for at := c.first; at <= c.last; at += step {
				if _, err := r.Record(base.Add(at), []history.Obs{{Slot: slots[0], Verdict: history.Up}}); err != nil {
					t.Fatal(err)
				}
			}
			o := read(t, r, slots[0], ks[0], base.Add(c.last))
			if want := base.Add(c.want); !o.Since.Equal(want) {
				t.Errorf("since %v, want %v", o.Since, want)
			}
		})
	}
	t.Run("an unsettled round is kept data too", func(t *testing.T) {
		r, _ := open(t, filepath.Join(t.TempDir(), "history.ring"), history.Options{Origins: 1})
		ks := keys(1)
		slots := sync(t, r, ks)
		if _, err := r.Record(base, []history.Obs{{Slot: slots[0], Verdict: history.Unsettled}}); err != nil {
			t.Fatal(err)
		}
		if o := read(t, r, slots[0], ks[0], base); !o.Since.Equal(base) {
			t.Errorf("since %v for an origin probed once, want %v", o.Since, base)
		}

	})
}
