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

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func open(t *testing.T, path string, o history.Options) (*history.Ring, history.Report) {
	t.Helper()
	r, rep, err := history.Open(path, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r, rep
}

func keys(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = history.Key(fmt.Sprintf("s%04d", i), "a")
	}
	return out
}

func sync(t *testing.T, r *history.Ring, ks []uint64) []int32 {
	t.Helper()
	slots, err := r.Sync(ks)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return slots
}

func read(t *testing.T, r *history.Ring, slot int32, key uint64, now time.Time) history.Origin {
	t.Helper()
	o, ok, damaged, err := r.Read(slot, key, now)
	if err != nil || !ok || damaged {
		t.Fatalf("Read: ok %v, damaged %v, err %v", ok, damaged, err)
	}
	return o
}

func TestSizes(t *testing.T) {
	if got := history.RecordSize(60); got != 1584 {
		t.Errorf("RecordSize(60) = %d; docs/history.md says 1584", got)
	}
	if history.RecordSize(60) != history.RecordSize(history.MaxRounds) {
		t.Errorf("a record's size depends on the rounds: %d, %d", history.RecordSize(60), history.RecordSize(history.MaxRounds))
	}
	for _, c := range []struct {
		sites int
		want  int64
	}{{1000, 4_935_680}, {10000, 40_800_256}, {100000, 399_446_016}} {
		r, rep := open(t, filepath.Join(t.TempDir(), "history.ring"), history.Options{Origins: 2 * c.sites})
		if rep.Size != c.want || history.FileSize(history.DefaultRounds, r.Capacity()) != c.want {
			t.Errorf("%d sites of 2 origins: file %d bytes, capacity %d; docs/history.md says %d", c.sites, rep.Size, r.Capacity(), c.want)
		}
		st, err := os.Stat(r.Path())
		if err != nil || st.Size() != c.want {
			t.Errorf("the file on disk: %v, %v", st, err)
		}
	}
}

// The sizes docs/history.md and docs/sizing.md give for a history sized
// by time (keep): the default 24 h at 30 s (2,880 rounds), 24 h at 500 ms
// (172,800) and the cap, at 10k and 100k sites of 2 origins (25,600 and
// 250,880 slots): the rounds cost 8 bytes each for the whole file.
func TestSizesByTime(t *testing.T) {
	if history.DefaultRounds != 2880 {
		t.Errorf("DefaultRounds = %d; docs/history.md says 2,880 (24 h at 30 s)", history.DefaultRounds)
	}
	for _, c := range []struct {
		rounds, slots int
		want          int64
	}{
		{2880, 25600, 40_800_256}, {2880, 250880, 399_446_016},
		{172800, 25600, 42_160_128}, {172800, 250880, 400_805_888},
		{1 << 20, 25600, 49_168_384}, {1 << 20, 250880, 407_814_144},
	} {
		if got := history.FileSize(c.rounds, c.slots); got != c.want {
			t.Errorf("FileSize(%d, %d) = %d; the docs say %d", c.rounds, c.slots, got, c.want)
		}
	}
	if history.MaxRounds != 1_048_576 {
		t.Errorf("MaxRounds = %d; docs/history.md states the cap 1,048,576", history.MaxRounds)
	}
}

// The file keeps the last Rounds rounds, oldest first, across the wrap of
// its round table: an origin whose verdict changes every few rounds (in
// runs of 1 to 10 rounds, within its RunSlots runs).
func TestBoundsAndWrapAround(t *testing.T) {
	// down is the verdict of round i: runs of 1, 2, ... 10 rounds.
	down := func(i int) bool {
		for n := 1; ; n = n%10 + 1 {
			if i < n {
				return n%2 == 0
			}
			i -= n
		}
	}
	for _, rounds := range []int{1, 5, 60} {
		t.Run(fmt.Sprintf("rounds=%d", rounds), func(t *testing.T) {
			r, _ := open(t, filepath.Join(t.TempDir(), "history.ring"), history.Options{Rounds: rounds, Origins: 3})
			ks := keys(3)
			slots := sync(t, r, ks)
			total := 2*rounds + 3
			for i := range total {
				obs := []history.Obs{{Slot: slots[1], Verdict: history.Up, By: 0, Latency: time.Duration(i) * time.Millisecond}}
				if down(i) {
					obs[0].Verdict = history.Down
				}
				if _, err := r.Record(t0.Add(time.Duration(i)*time.Second), obs); err != nil {
					t.Fatal(err)
				}
				o := read(t, r, slots[1], ks[1], t0.Add(time.Duration(i)*time.Second))
				if want := min(i+1, rounds); len(o.Points) != want {
					t.Fatalf("after %d rounds %d points, want %d", i+1, len(o.Points), want)
				}
			}
			o := read(t, r, slots[1], ks[1], t0.Add(time.Duration(total)*time.Second))
			for k, p := range o.Points {
				i := total - rounds + k
				if want := t0.Add(time.Duration(i) * time.Second); !p.Time.Equal(want) {
					t.Errorf("point %d at %v, want %v", k, p.Time, want)
				}
				if p.Latency != time.Duration(i)*time.Millisecond {
					t.Errorf("point %d latency %v", k, p.Latency)
				}
				if want := map[bool]history.Verdict{true: history.Down, false: history.Up}[down(i)]; p.Verdict != want || p.By != 0 {
					t.Errorf("point %d verdict %v by %d", k, p.Verdict, p.By)
				}
			}
			// The neighbours were not touched.
			for _, s := range []int{0, 2} {
				if o, ok, _, _ := r.Read(slots[s], ks[s], t0); ok && len(o.Points) > 0 {
					t.Errorf("slot %d got points", s)
				}
			}
		})
	}
}

func TestReopenKeepsHistoryAndSlots(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	r, rep := open(t, path, history.Options{Origins: 10})
	if !rep.Created {
		t.Error("a new file is not reported as created")
	}
	ks := keys(10)
	slots := sync(t, r, ks)
	obs := make([]history.Obs, len(slots))
	for i, s := range slots {
		obs[i] = history.Obs{Slot: s, Verdict: history.Up, By: -1, State: history.Healthy}
	}
	if _, err := r.Record(t0, obs); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r2, rep2 := open(t, path, history.Options{Origins: 10})
	if rep2.Created || rep2.Restarted != "" {
		t.Fatalf("a sound file was not kept: %+v", rep2)
	}
	// Reordered keys keep their slots; a dropped one is freed.
	again := sync(t, r2, []uint64{ks[3], ks[0]})
	if again[0] != slots[3] || again[1] != slots[0] {
		t.Errorf("slots %v, want %d %d", again, slots[3], slots[0])
	}
	o := read(t, r2, again[0], ks[3], t0)
	if len(o.Points) != 1 || o.Points[0].State != history.Healthy || o.Points[0].By != -1 {
		t.Errorf("after reopening: %+v", o.Points)
	}
	if _, ok, _, _ := r2.Read(slots[5], ks[5], t0); ok {
		t.Error("a dropped origin still has its history")
	}
}

// A damaged or cut file is found at open and made again empty; Open does
// not fail.
func TestDamagedFileStartsEmpty(t *testing.T) {
	cases := []struct {
		name string
		harm func(path string) error
		why  string
	}{
		{"truncated", func(p string) error { return os.Truncate(p, 10000) }, "cut or overwritten"},
		{"cut inside the header", func(p string) error { return os.Truncate(p, 100) }, "cut short"},
		{"empty", func(p string) error { return os.Truncate(p, 0) }, "cut short"},
		{"bad magic", func(p string) error { return patch(p, 0, []byte("NOTVIGIL")) }, "magic"},
		{"header bit flip", func(p string) error { return patch(p, 17, []byte{0xff}) }, "checksum"},
		{"duplicate index keys", func(p string) error {
			b := make([]byte, 16)
			for i := range b {
				b[i] = byte(i % 8)
			}
			return patch(p, history.IndexAt(history.DefaultRounds), b) // header, group table, round table
		}, "index"},
		{"round table bit flip", func(p string) error { return patch(p, history.RoundTableAt()+9, []byte{0xff}) }, "round table"},
		{"group table bit flip", func(p string) error { return patch(p, 4096+2, []byte{0xff}) }, "voter groups"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "history.ring")
			r, _ := open(t, path, history.Options{Origins: 4})
			sync(t, r, keys(4))
			r.Close()
			if err := c.harm(path); err != nil {
				t.Fatal(err)
			}
			r2, rep := open(t, path, history.Options{Origins: 4})
			if rep.Restarted == "" || !contains(rep.Restarted, c.why) {
				t.Fatalf("Restarted = %q, want it to say %q", rep.Restarted, c.why)
			}
			slots := sync(t, r2, keys(4))
			if _, err := r2.Record(t0, []history.Obs{{Slot: slots[0], Verdict: history.Up}}); err != nil {
				t.Fatalf("the restarted file does not take a round: %v", err)
			}
		})
	}
}

// A record whose checksum fails reads as damaged and starts again empty at
// its next write; its neighbours keep theirs.
func TestDamagedRecordIsReset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	r, _ := open(t, path, history.Options{Origins: 2})
	ks := keys(2)
	slots := sync(t, r, ks)
	for i := range 5 {
		if _, err := r.Record(t0.Add(time.Duration(i)*time.Minute), []history.Obs{{Slot: slots[0], Verdict: history.Up}, {Slot: slots[1], Verdict: history.Down}}); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	recordsAt := history.RecordsAt(1024) // header, group table, index of 1024 slots
	if err := patch(path, recordsAt+int64(slots[0])*int64(history.RecordSize(60))+40, []byte{0xde, 0xad}); err != nil {
		t.Fatal(err)
	}
	r2, rep := open(t, path, history.Options{Origins: 2})
	if rep.Restarted != "" {
		t.Fatalf("one bad record restarted the whole file: %s", rep.Restarted)
	}
	if _, ok, damaged, err := r2.Read(slots[0], ks[0], t0); ok || !damaged || err != nil {
		t.Fatalf("damaged record read: ok %v damaged %v err %v", ok, damaged, err)
	}
	reset, err := r2.Record(t0.Add(time.Hour), []history.Obs{{Slot: slots[0], Verdict: history.Up}, {Slot: slots[1], Verdict: history.Down}})
	if err != nil || reset != 1 {
		t.Fatalf("Record: reset %d, err %v; want 1 reset", reset, err)
	}
	if o := read(t, r2, slots[0], ks[0], t0.Add(time.Hour)); len(o.Points) != 1 {
		t.Errorf("the reset record has %d points, want the new one only", len(o.Points))
	}
	if o := read(t, r2, slots[1], ks[1], t0.Add(time.Hour)); len(o.Points) != 6 {
		t.Errorf("the neighbour has %d points, want 6", len(o.Points))
	}
}

// A write that fails (a full disk) is an error for that round only: the
// next round writes again.
func TestFullDiskOnWrite(t *testing.T) {
	r, _ := open(t, filepath.Join(t.TempDir(), "history.ring"), history.Options{Origins: 1})
	ks := keys(1)
	slots := sync(t, r, ks)
	r.SetWriteAt(func([]byte, int64) (int, error) { return 0, syscall.ENOSPC })
	_, err := r.Record(t0, []history.Obs{{Slot: slots[0], Verdict: history.Up}})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Record on a full disk: %v, want ENOSPC", err)
	}
	if _, err := r.Sync(keys(3)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Sync on a full disk: %v", err)
	}
	r.SetWriteAt(nil) // back to the file
	r2 := reopenWrites(r)
	if _, err := r2.Record(t0.Add(time.Second), []history.Obs{{Slot: slots[0], Verdict: history.Down}}); err != nil {
		t.Fatalf("after the disk has room again: %v", err)
	}
	if o := read(t, r2, slots[0], ks[0], t0.Add(time.Second)); len(o.Points) != 1 || o.Points[0].Verdict != history.Down {
		t.Errorf("points %+v, want the one round written after the failure", o.Points)
	}
}

func reopenWrites(r *history.Ring) *history.Ring {
	f, err := os.OpenFile(r.Path(), os.O_RDWR, 0)
	if err != nil {
		panic(err)
	}
	r.SetWriteAt(func(b []byte, off int64) (int, error) { return f.WriteAt(b, off) })
	return r
}

func TestFullRingLeavesNewOriginsOut(t *testing.T) {
	r, rep := open(t, filepath.Join(t.TempDir(), "history.ring"), history.Options{Origins: 1})
	if rep.Capacity != 1024 {
		t.Fatalf("capacity %d", rep.Capacity)
	}
	slots := sync(t, r, keys(1030))
	out := 0
	for _, s := range slots {
		if s < 0 {
			out++
		}
	}
	if out != 6 {
		t.Errorf("%d origins without a slot, want 6", out)
	}
	if _, err := r.Record(t0, []history.Obs{{Slot: -1, Verdict: history.Up}, {Slot: slots[0], Verdict: history.Up}}); err != nil {
		t.Fatal(err)
	}
}

func TestGrowKeepsHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	r, _ := open(t, path, history.Options{Origins: 10})
	ks := keys(10)
	slots := sync(t, r, ks)
	if _, err := r.Record(t0, []history.Obs{{Slot: slots[7], Verdict: history.Down}}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r2, rep := open(t, path, history.Options{Origins: 3000})
	if !rep.Grown || r2.Capacity() < 3000 {
		t.Fatalf("not grown: %+v", rep)
	}
	if o := read(t, r2, slots[7], ks[7], t0); len(o.Points) != 1 || o.Points[0].Verdict != history.Down {
		t.Errorf("after growing: %+v", o.Points)
	}
	if _, err := os.Stat(path + ".grow"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file is left: %v", err)
	}
}

func patch(path string, off int64, b []byte) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(b, off)
	return err
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// Rounds less than a second apart keep their milliseconds (version 4):
// read back, each point has its round's own time, in order.
func TestMillisecondsKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	r, _ := open(t, path, history.Options{Origins: 1})
	k := history.Key("www", "a1")
	slot := sync(t, r, []uint64{k})[0]
	var want []time.Time
	for i := range 5 {
		at := t0.Add(time.Duration(i)*250*time.Millisecond + 7*time.Millisecond + 123*time.Microsecond)
		want = append(want, at.Truncate(time.Millisecond))
		if _, err := r.Record(at, []history.Obs{{Slot: slot, Verdict: history.Up, By: 0, State: history.Healthy}}); err != nil {
			t.Fatal(err)
		}
	}
	o := read(t, r, slot, k, t0.Add(time.Minute))
	snap, err := history.ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, pts := range map[string][]history.Point{"Read": o.Points, "ReadSnapshot": snap.Origins[k].Points} {
		if len(pts) != len(want) {
			t.Fatalf("%s: %d points, want %d", name, len(pts), len(want))
		}
		for i, p := range pts {
			if !p.Time.Equal(want[i]) {
				t.Errorf("%s: point %d at %s, want %s", name, i, p.Time.Format(time.RFC3339Nano), want[i].Format(time.RFC3339Nano))
			}
		}
	}
}
