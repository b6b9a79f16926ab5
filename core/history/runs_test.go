package history_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/history"
)

// steady is an origin's round: up, settled by source 0 with ups up votes,
// healthy, and abstain abstentions (which do not break a run).
func steady(slot int32, ups, abstain uint8, latency time.Duration) history.Obs {
	o := history.Obs{Slot: slot, Verdict: history.Up, By: 0, State: history.Healthy, Latency: latency, NVotes: 1}
	o.Votes[0] = history.Tally{Source: 0, Up: ups, Abstain: abstain}
	return o
}

// A run grows across rounds alike (abstentions may wobble), also across a
// gap in time, and a new one starts at a change of verdict or of votes.
func TestRunsGrowAndBreak(t *testing.T) {
	for _, c := range []struct {
		name  string
		round func(i int, slot int32) (time.Duration, history.Obs)
		runs  int
	}{
		{"alike", func(i int, s int32) (time.Duration, history.Obs) {
			return time.Duration(i) * 30 * time.Second, steady(s, 5, uint8(i%3), 0)
		}, 1},
		{"a verdict changes", func(i int, s int32) (time.Duration, history.Obs) {
			o := steady(s, 5, 0, 0)
			if i >= 10 {
				o.Verdict = history.Unsettled
			}
			return time.Duration(i) * 30 * time.Second, o
		}, 2},
		{"an up vote more", func(i int, s int32) (time.Duration, history.Obs) {
			return time.Duration(i) * 30 * time.Second, steady(s, 5+uint8(i/10), 0, 0)
		}, 2},
		// Every round of the file still: its rounds keep their own
		// times from the round table.
		{"a gap of an hour", func(i int, s int32) (time.Duration, history.Obs) {
			at := time.Duration(i) * 30 * time.Second
			if i >= 10 {
				at += time.Hour
			}
			return at, steady(s, 5, 0, 0)
		}, 1},
		{"a round half a spacing early", func(i int, s int32) (time.Duration, history.Obs) {
			at := time.Duration(i) * 30 * time.Second
			if i >= 10 {
				at -= 15 * time.Second
			}
			return at, steady(s, 5, 0, 0)
		}, 1},
		{"jitter of a few ms stays in the run", func(i int, s int32) (time.Duration, history.Obs) {
			return time.Duration(i)*30*time.Second + time.Duration(i*7%13)*time.Millisecond, steady(s, 5, 0, 0)
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := open(t, filepath.Join(t.TempDir(), "history.ring"), history.Options{Origins: 2})
			ks := keys(1)
			slots := sync(t, r, ks)
			var want []time.Time
			for i := range 20 {
				at, o := c.round(i, slots[0])
				want = append(want, t0.Add(at))
				if _, err := r.Record(t0.Add(at), []history.Obs{o}); err != nil {
					t.Fatal(err)
				}
			}
			got := read(t, r, slots[0], ks[0], want[len(want)-1])
			if got.Runs != c.runs || len(got.Points) != 20 {
				t.Fatalf("%d runs, %d points; want %d runs, 20 points", got.Runs, len(got.Points), c.runs)
			}
			for i, p := range got.Points {
				_, o := c.round(i, slots[0])
				if !p.Time.Equal(want[i]) || p.Verdict != o.Verdict || len(p.Votes) != 1 || p.Votes[0].Up != o.Votes[0].Up {
					t.Errorf("point %d: %v %v %+v; want %v %v up %d", i, p.Time, p.Verdict, p.Votes, want[i], o.Verdict, o.Votes[0].Up)
				}
			}
		})
	}
}

// 24 hours of 30 s rounds (the default rounds) of a steady origin are one
// run, and read back as 2,880 rounds at their exact times, with the
// latencies of the last RecentRounds.
func TestDayOfRounds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	r, _ := open(t, path, history.Options{Origins: 2})
	ks := keys(2)
	slots := sync(t, r, ks)
	n := history.DefaultRounds
	times := make([]time.Time, n)
	for i := range n {
		// A round starts a few ms late, as the engine's do.
		times[i] = t0.Add(time.Duration(i)*30*time.Second + time.Duration(i*37%23)*time.Millisecond)
		obs := []history.Obs{steady(slots[0], 3, 0, time.Duration(i)*time.Millisecond), steady(slots[1], 3, 0, 0)}
		if i%2 == 1 {
			obs[1].Verdict = history.Down // flapping every round: past its runs
			obs[1].By = 0
		}
		if _, err := r.Record(times[i], obs); err != nil {
			t.Fatal(err)
		}
	}
	now := times[n-1]
	for _, c := range []struct {
		name string
		get  func() history.Origin
	}{
		{"Read", func() history.Origin { return read(t, r, slots[0], ks[0], now) }},
		{"ReadSnapshot", func() history.Origin {
			snap, err := history.ReadSnapshot(path)
			if err != nil || snap.Rounds != n || snap.Version != 5 {
				t.Fatalf("snapshot %v rounds, version %v: %v", snap.Rounds, snap.Version, err)
			}
			return snap.Origins[ks[0]]
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.get()
			if o.Runs != 1 || len(o.Points) != n || o.Cut {
				t.Fatalf("%d runs, %d points, cut %v; want 1 run of %d", o.Runs, len(o.Points), o.Cut, n)
			}
			for i, p := range o.Points {
				if !p.Time.Equal(times[i]) {
					t.Fatalf("round %d at %v, want %v", i, p.Time, times[i])
				}
				want := time.Duration(0)
				if i >= n-history.RecentRounds {
					want = time.Duration(i) * time.Millisecond
				}
				if p.Latency != want {
					t.Fatalf("round %d latency %v, want %v", i, p.Latency, want)
				}
			}
			if !o.Since.Equal(times[0]) {
				t.Errorf("since %v, want the first round %v", o.Since, times[0])
			}
		})
	}
	// ReadLast expands only the last rounds, and says what is kept.
	for _, k := range []int{0, 1} {
		full := read(t, r, slots[k], ks[k], now)
		for _, last := range []int{1, history.RecentRounds, n + 5} {
			o, ok, _, err := r.ReadLast(slots[k], ks[k], now, last)
			if err != nil || !ok {
				t.Fatalf("ReadLast: %v %v", ok, err)
			}
			want := full.Points[max(0, len(full.Points)-last):]
			if len(o.Points) != len(want) || o.Kept != len(full.Points) || !o.KeptSince.Equal(full.Points[0].Time) || o.Cut != full.Cut || !o.Since.Equal(full.Since) {
				t.Fatalf("origin %d, last %d: %d points, kept %d since %v; want %d, %d since %v", k, last, len(o.Points), o.Kept, o.KeptSince, len(want), len(full.Points), full.Points[0].Time)
			}
			for i := range want {
				if !o.Points[i].Time.Equal(want[i].Time) || o.Points[i].Verdict != want[i].Verdict || o.Points[i].Latency != want[i].Latency {
					t.Fatalf("origin %d, last %d, point %d: %+v, want %+v", k, last, i, o.Points[i], want[i])
				}
			}
		}
	}
	// The flapping origin keeps its newest RunSlots rounds, and says so.
	o := read(t, r, slots[1], ks[1], now)
	if !o.Cut || len(o.Points) != history.RunSlots || o.Runs != history.RunSlots {
		t.Fatalf("flapping: cut %v, %d points, %d runs; want cut, %d", o.Cut, len(o.Points), o.Runs, history.RunSlots)
	}
	for k, p := range o.Points {
		i := n - history.RunSlots + k
		if !p.Time.Equal(times[i]) || (p.Verdict == history.Down) != (i%2 == 1) {
			t.Errorf("flapping point %d: %v %v, want round %d at %v", k, p.Time, p.Verdict, i, times[i])
		}
	}
	// Its uptime counters still hold the whole day: data since the 6
	// hours it began in, not its first kept run.
	if w := o.Windows[history.Window24h]; w.Up+w.Down != n {
		t.Errorf("24 h window %+v, want %d judged rounds", w, n)
	}
	if !o.Since.Before(times[n-history.RunSlots]) {
		t.Errorf("since %v, want before its first kept round", o.Since)
	}
}

// Past the file's rounds the oldest rounds are let go, even inside a run:
// keep bounds the age of what is kept.
func TestRoundsBoundAge(t *testing.T) {
	for _, rounds := range []int{1, 7, 100} {
		t.Run(fmt.Sprint(rounds), func(t *testing.T) {
			r, _ := open(t, filepath.Join(t.TempDir(), "history.ring"), history.Options{Origins: 1, Rounds: rounds})
			ks := keys(1)
			slots := sync(t, r, ks)
			total := 3*rounds + 5
			for i := range total {
				if _, err := r.Record(t0.Add(time.Duration(i)*time.Minute), []history.Obs{steady(slots[0], 2, 0, 0)}); err != nil {
					t.Fatal(err)
				}
			}
			o := read(t, r, slots[0], ks[0], t0.Add(time.Duration(total)*time.Minute))
			if len(o.Points) != rounds || o.Cut {
				t.Fatalf("%d points, cut %v; want the last %d", len(o.Points), o.Cut, rounds)
			}
			if want := t0.Add(time.Duration(total-rounds) * time.Minute); !o.Points[0].Time.Equal(want) {
				t.Errorf("first point %v, want %v", o.Points[0].Time, want)
			}
			tail, ok, _, err := r.ReadLast(slots[0], ks[0], t0.Add(time.Duration(total)*time.Minute), 3)
			if err != nil || !ok || len(tail.Points) != min(3, rounds) || tail.Kept != rounds || !tail.KeptSince.Equal(o.Points[0].Time) {
				t.Fatalf("ReadLast: %d points, kept %d since %v; %v %v", len(tail.Points), tail.Kept, tail.KeptSince, ok, err)
			}
			if !tail.Points[len(tail.Points)-1].Time.Equal(o.Points[len(o.Points)-1].Time) {
				t.Errorf("ReadLast ends %v, want %v", tail.Points[len(tail.Points)-1].Time, o.Points[len(o.Points)-1].Time)
			}
		})
	}
}

// An origin probed every third round (sites_per_round below the fleet)
// keeps its rounds in one run, at their exact times: each is moved to
// the round of the table nearest to its place.
func TestRunOfEveryThirdRound(t *testing.T) {
	r, _ := open(t, filepath.Join(t.TempDir(), "history.ring"), history.Options{Origins: 2})
	ks := keys(2)
	slots := sync(t, r, ks)
	var want []time.Time
	for i := range 90 {
		at := t0.Add(time.Duration(i)*10*time.Second + time.Duration(i*13%31)*time.Millisecond)
		s := slots[1]
		if i%3 == 0 {
			s = slots[0]
			want = append(want, at)
		}
		if _, err := r.Record(at, []history.Obs{steady(s, 1, 0, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	o := read(t, r, slots[0], ks[0], t0.Add(time.Hour))
	if o.Runs != 1 || len(o.Points) != len(want) {
		t.Fatalf("%d runs, %d points; want 1 run of %d", o.Runs, len(o.Points), len(want))
	}
	for i, p := range o.Points {
		if !p.Time.Equal(want[i]) {
			t.Errorf("round %d at %v, want %v", i, p.Time, want[i])
		}
	}
	tail, ok, _, err := r.ReadLast(slots[0], ks[0], t0.Add(time.Hour), 5)
	if err != nil || !ok || len(tail.Points) != 5 || tail.Kept != len(want) {
		t.Fatalf("ReadLast: %d points of %d, %v %v", len(tail.Points), tail.Kept, ok, err)
	}
	for i, p := range tail.Points {
		if w := want[len(want)-5+i]; !p.Time.Equal(w) {
			t.Errorf("ReadLast round %d at %v, want %v", i, p.Time, w)
		}
	}
}

// BenchmarkReadDay is what a read pays for one origin kept 24 hours in
// one run: all its 2,880 rounds expanded (an export), or the last 60 (the
// API), side by side.
func BenchmarkReadDay(b *testing.B) {
	r, _, err := history.Open(filepath.Join(b.TempDir(), "history.ring"), history.Options{Origins: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	k := history.Key("www", "a1")
	slots, err := r.Sync([]uint64{k})
	if err != nil {
		b.Fatal(err)
	}
	for i := range history.DefaultRounds {
		if _, err := r.Record(t0.Add(time.Duration(i)*30*time.Second), []history.Obs{steady(slots[0], 3, 0, 0)}); err != nil {
			b.Fatal(err)
		}
	}
	for _, last := range []int{0, history.RecentRounds} {
		b.Run(fmt.Sprintf("last=%d", last), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var o history.Origin
				var ok bool
				var err error
				if last == 0 {
					o, ok, _, err = r.Read(slots[0], k, t0.Add(24*time.Hour))
				} else {
					o, ok, _, err = r.ReadLast(slots[0], k, t0.Add(24*time.Hour), last)
				}
				if err != nil || !ok || o.Kept != history.DefaultRounds {
					b.Fatalf("read %d points of %d, %v %v", len(o.Points), o.Kept, ok, err)
				}
			}
		})
	}
}

// An origin probed at uneven steps of the table's rounds (sites_per_round
// = "auto") gets back each of its rounds, never a neighbour it was not
// in.
func TestRunOfUnevenRounds(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []int // the origin's rounds, in rounds of 10 s
	}{
		{"4 3 4 4 4", []int{0, 4, 7, 11, 15, 19}},
		{"3 4 3 4 3 4", []int{0, 3, 7, 10, 14, 17, 21}},
		{"1 2 1 2", []int{0, 1, 3, 4, 6, 7, 9}},
		{"every round, then a gap", []int{0, 1, 2, 3, 40, 41, 42}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := open(t, filepath.Join(t.TempDir(), "history.ring"), history.Options{Origins: 2, Rounds: 100})
			ks := keys(2)
			slots := sync(t, r, ks)
			var want []time.Time
			in := map[int]bool{}
			for _, s := range c.steps {
				in[s] = true
			}
			last := c.steps[len(c.steps)-1]
			for i := 0; i <= last; i++ {
				at := t0.Add(time.Duration(i) * 10 * time.Second)
				s := slots[1]
				if in[i] {
					s = slots[0]
					want = append(want, at)
				}
				if _, err := r.Record(at, []history.Obs{steady(s, 1, 0, 0)}); err != nil {
					t.Fatal(err)
				}
			}
			o := read(t, r, slots[0], ks[0], t0.Add(time.Hour))
			if len(o.Points) != len(want) {
				t.Fatalf("%d points; want %d", len(o.Points), len(want))
			}
			for i, p := range o.Points {
				if !p.Time.Equal(want[i]) {
					t.Errorf("round %d at %v, want %v", i, p.Time, want[i])
				}
			}
		})
	}
}
