package history_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/history"
)

// roundsFile writes n rounds 30 s apart of one steady origin into a file
// keeping rounds rounds, and leaves it open.
func roundsFile(t *testing.T, rounds, n int) (r *history.Ring, path string, slot int32, key uint64) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "history.ring")
	r, _ = open(t, path, history.Options{Origins: 1, Rounds: rounds})
	ks := keys(1)
	slots := sync(t, r, ks)
	for i := range n {
		if _, err := r.Record(roundAt(i), []history.Obs{steady(slots[0], 5, 0, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	return r, path, slots[0], ks[0]
}

func roundAt(i int) time.Time { return t0.Add(time.Duration(i) * 30 * time.Second) }

func readAt(t *testing.T, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

// A reader that meets the newest round's entry under the head before it
// (the agent between its two writes, or stopped there by a crash) lets
// that one oldest slot go, not the origin's history.
func TestTornRoundTableKeepsHistory(t *testing.T) {
	r, path, _, key := roundsFile(t, 10, 15)
	head := readAt(t, path, history.RoundTableAt(), 16)
	if _, err := r.Record(roundAt(15), []history.Obs{steady(0, 5, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := patch(path, history.RoundTableAt(), head); err != nil {
		t.Fatal(err)
	}
	s, err := history.ReadSnapshot(path)
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	o := s.Origins[key]
	// The head read says rounds 5 to 14: round 5's slot holds round 15,
	// which that head does not count yet.
	if len(o.Points) != 9 {
		t.Fatalf("%d points from %v; want rounds 6 to 14", len(o.Points), o.KeptSince)
	}
	for i, p := range o.Points {
		if !p.Time.Equal(roundAt(6 + i)) {
			t.Errorf("point %d at %v, want %v", i, p.Time, roundAt(6+i))
		}
	}
	_, rep := open(t, path, history.Options{Origins: 1, Rounds: 10})
	if rep.Restarted != "" {
		t.Errorf("a crash between the entry and its head restarted the file: %s", rep.Restarted)
	}
}

// One byte flipped anywhere in the written round table is found, at open
// (the file starts again, saying why) and by ReadSnapshot (an error).
func TestRoundTableDamage(t *testing.T) {
	at := history.RoundTableAt()
	for _, c := range []struct {
		name string
		off  int64
	}{
		{"the rounds written", at},
		{"the rounds held", at + 12},
		{"an entry's time, low byte", at + 16 + 8*3},
		{"an entry's time, a middle byte", at + 16 + 8*3 + 3},
		{"an entry's check", at + 16 + 8*7 + 7},
		{"the newest entry", at + 16 + 8*4},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, path, _, _ := roundsFile(t, 10, 15)
			r.Close()
			b := readAt(t, path, c.off, 1)
			if err := patch(path, c.off, []byte{b[0] ^ 0x10}); err != nil {
				t.Fatal(err)
			}
			if _, err := history.ReadSnapshot(path); err == nil || !contains(err.Error(), "round table") {
				t.Errorf("ReadSnapshot of a damaged round table: %v", err)
			}
			_, rep := open(t, path, history.Options{Origins: 1, Rounds: 10})
			if !contains(rep.Restarted, "round table") {
				t.Errorf("Restarted = %q; want it to name the round table", rep.Restarted)
			}
		})
	}
}

// A round stamped far ahead (a clock stepped forward, then back) does not
// stop the table: the rounds after the step back are kept with their own
// times, and keep still bounds them.
func TestClockStepBack(t *testing.T) {
	r, _, slot, key := roundsFile(t, 10, 5)
	if _, err := r.Record(t0.AddDate(1, 0, 0), []history.Obs{steady(slot, 5, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 40; i++ {
		if _, err := r.Record(roundAt(i), []history.Obs{steady(slot, 5, 0, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	o := read(t, r, slot, key, roundAt(40))
	var last []history.Point
	for _, p := range o.Points {
		if !p.Time.After(roundAt(40)) {
			last = append(last, p)
		}
	}
	if len(last) != 10 || o.Kept > 11 {
		t.Fatalf("%d points before now, %d kept; want the last 10 rounds (the table's), and at most the step's round more", len(last), o.Kept)
	}
	for i, p := range last {
		if want := roundAt(30 + i); !p.Time.Equal(want) {
			t.Errorf("point %d at %v, want %v", i, p.Time, want)
		}
	}
}

// A round table write that fails leaves the table as it was: the rounds
// already kept still read back.
func TestRoundTableWriteFails(t *testing.T) {
	r, _, slot, key := roundsFile(t, 10, 15)
	r.SetWriteAt(func([]byte, int64) (int, error) { return 0, syscall.ENOSPC })
	if _, err := r.Record(roundAt(15), []history.Obs{steady(slot, 5, 0, 0)}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Record on a full disk: %v", err)
	}
	o := read(t, r, slot, key, roundAt(15))
	if len(o.Points) != 10 || !o.Points[9].Time.Equal(roundAt(14)) {
		t.Fatalf("%d points after a failed write; want the 10 rounds kept before it", len(o.Points))
	}
	// A round from a clock gone back, whose write fails, leaves the
	// table as it was too.
	if _, err := r.Record(roundAt(3), []history.Obs{steady(slot, 5, 0, 0)}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Record on a full disk: %v", err)
	}
	if o := read(t, r, slot, key, roundAt(15)); len(o.Points) != 10 {
		t.Fatalf("%d points after a failed write of an earlier round; want 10", len(o.Points))
	}
	reopenWrites(r)
	if _, err := r.Record(roundAt(15), []history.Obs{steady(slot, 5, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	if o := read(t, r, slot, key, roundAt(15)); len(o.Points) != 10 || !o.Points[9].Time.Equal(roundAt(15)) {
		t.Errorf("%d points once the disk has room; want rounds 6 to 15", len(o.Points))
	}
}

// A file opened with another number of rounds (keep = "24h" and a new
// round_interval) keeps its records and its last rounds' times, as many
// as it now keeps.
func TestRoundsChangeKeepsHistory(t *testing.T) {
	r, path, slot, key := roundsFile(t, 30, 40)
	r.Close()
	n, prev := 40, 30
	for _, c := range []struct{ rounds, more, want int }{
		{60, 5, 35},  // rounds 10 to 44: the 30 kept, 5 more
		{60, 30, 60}, // then it fills up to 60
		{10, 0, 10},  // smaller: the last 10
		{10, 3, 10},
		{1000, 1, 11},
	} {
		t.Run(fmt.Sprint(c.rounds), func(t *testing.T) {
			r, rep := open(t, path, history.Options{Origins: 1, Rounds: c.rounds})
			want := prev // Resized: the rounds before, when they change
			if prev == c.rounds {
				want = 0
			}
			if rep.Restarted != "" || rep.Created || rep.Resized != want {
				t.Fatalf("reopened with %d rounds: restarted %q, resized from %d; want %d", c.rounds, rep.Restarted, rep.Resized, want)
			}
			prev = c.rounds
			if r.Rounds() != c.rounds {
				t.Fatalf("the file keeps %d rounds, want %d", r.Rounds(), c.rounds)
			}
			if st, err := os.Stat(path); err != nil || st.Size() != history.FileSize(c.rounds, r.Capacity()) {
				t.Fatalf("file size %v, want %d: %v", st, history.FileSize(c.rounds, r.Capacity()), err)
			}
			for range c.more {
				if _, err := r.Record(roundAt(n), []history.Obs{steady(slot, 5, 0, 0)}); err != nil {
					t.Fatal(err)
				}
				n++
			}
			check := func(how string, o history.Origin) {
				t.Helper()
				if len(o.Points) != c.want {
					t.Fatalf("%s: %d points, want the last %d rounds", how, len(o.Points), c.want)
				}
				for i, p := range o.Points {
					if want := roundAt(n - c.want + i); !p.Time.Equal(want) {
						t.Errorf("%s: point %d at %v, want %v", how, i, p.Time, want)
					}
				}
			}
			check("Read", read(t, r, slot, key, roundAt(n)))
			r.Close()
			s, err := history.ReadSnapshot(path)
			if err != nil {
				t.Fatal(err)
			}
			check("ReadSnapshot", s.Origins[key])
		})
	}
}

// An export beside a writing agent always finds the origin's history: a
// snapshot read while rounds are written holds the rounds its table
// held, less at most the few written meanwhile.
func TestSnapshotBesideWriter(t *testing.T) {
	const rounds = 20
	r, path, slot, _ := roundsFile(t, rounds, rounds+5)
	key := keys(1)[0]
	done := make(chan error, 1)
	go func() {
		for i := rounds + 5; i < rounds+400; i++ {
			if _, err := r.Record(roundAt(i), []history.Obs{steady(slot, 5, 0, 0)}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	reads := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d snapshots beside the writer", reads)
			return
		default:
		}
		s, err := history.ReadSnapshot(path)
		if err != nil {
			t.Fatalf("snapshot %d: %v", reads, err)
		}
		o := s.Origins[key]
		if len(o.Points) < rounds/2 {
			t.Fatalf("snapshot %d: %d points of the last %d rounds", reads, len(o.Points), rounds)
		}
		for i := 1; i < len(o.Points); i++ {
			if !o.Points[i].Time.After(o.Points[i-1].Time) {
				t.Fatalf("snapshot %d: point %d at %v is not after %v", reads, i, o.Points[i].Time, o.Points[i-1].Time)
			}
		}
		reads++
	}
}
