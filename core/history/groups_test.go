package history

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// openTest opens a new file in a temporary folder with slots for keys.
func openTest(t *testing.T, path string, keys ...uint64) (*Ring, []int32) {
	t.Helper()
	r, _, err := Open(path, Options{Origins: len(keys)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	slots, err := r.Sync(keys)
	if err != nil {
		t.Fatal(err)
	}
	return r, slots
}

func partObs(slot int32, groups ...string) Obs {
	o := Obs{Slot: slot, Verdict: Up, By: 1, State: Healthy, Partition: true, NDown: uint8(len(groups)),
		NVotes: 2, Votes: [VoteSlots]Tally{{Source: 0, Up: 1, Down: 1}, {Source: 1, Up: 1}}}
	copy(o.DownGroups[:], groups)
	return o
}

// Each round keeps the down groups of the partition rule by number, their
// names in the file's table: a round with the rule off keeps none and
// says so, a round with more than GroupSlots keeps the first and says
// some were cut, and the names survive a reopen and a grow.
func TestDownGroupsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	k := Key("www", "a1")
	r, slots := openTest(t, path, k)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rounds := []Obs{
		{Slot: slots[0], Verdict: Up, By: 0, State: Healthy}, // the rule off
		partObs(slots[0]), // on, no group down
		partObs(slots[0], "node/pop=eu"),
		partObs(slots[0], "node/pop=us", "node/pop=eu", "direct"), // one too many
	}
	for i, o := range rounds {
		if _, err := r.Record(at.Add(time.Duration(i)*time.Second), []Obs{o}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, o Origin) {
		t.Helper()
		if len(o.Points) != len(rounds) {
			t.Fatalf("%s: %d points, want %d", what, len(o.Points), len(rounds))
		}
		for i, want := range []struct {
			part   bool
			groups []string
			cut    bool
		}{
			{false, nil, false},
			{true, []string{}, false},
			{true, []string{"node/pop=eu"}, false},
			{true, []string{"node/pop=us", "node/pop=eu"}, true},
		} {
			p := o.Points[i]
			if p.Partition != want.part || !slices.Equal(p.DownGroups, want.groups) || (p.DownGroups == nil) != (want.groups == nil) || p.GroupsCut != want.cut {
				t.Errorf("%s, round %d: partition %v groups %q cut %v; want %v %q %v", what, i, p.Partition, p.DownGroups, p.GroupsCut, want.part, want.groups, want.cut)
			}
			if len(p.Votes) != int(rounds[i].NVotes) {
				t.Errorf("%s, round %d: votes %+v", what, i, p.Votes)
			}
		}
	}
	o, ok, _, err := r.Read(slots[0], k, at)
	if err != nil || !ok {
		t.Fatalf("Read: %v %v", ok, err)
	}
	check("Read", o)
	snap, err := ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != version || snap.GroupSlots != GroupSlots {
		t.Fatalf("snapshot version %d, group slots %d", snap.Version, snap.GroupSlots)
	}
	check("ReadSnapshot", snap.Origins[k])
	r.Close()

	// Reopened, the names keep their numbers and a new one comes after.
	r2, slots2 := openTest(t, path, k)
	if got := r2.groups.names; !slices.Equal(got, []string{"node/pop=eu", "node/pop=us"}) {
		t.Fatalf("the reopened table: %q", got)
	}
	if _, err := r2.Record(at.Add(10*time.Second), []Obs{partObs(slots2[0], "node/pop=ap", "node/pop=eu")}); err != nil {
		t.Fatal(err)
	}
	if err := r2.grow(2048); err != nil {
		t.Fatal(err)
	}
	o, _, _, err = r2.Read(slots2[0], k, at)
	if err != nil {
		t.Fatal(err)
	}
	if last := o.Points[len(o.Points)-1]; !slices.Equal(last.DownGroups, []string{"node/pop=ap", "node/pop=eu"}) {
		t.Fatalf("after a grow, the last round's groups: %q", last.DownGroups)
	}
	snap, err = ReadSnapshot(path)
	if err != nil || len(snap.Origins[k].Points) != len(rounds)+1 {
		t.Fatalf("the grown file: %v %+v", err, snap)
	}
	check("the grown file", Origin{Points: snap.Origins[k].Points[:len(rounds)]})
}

// A table that has no room for a name leaves it out, and the round says
// some groups were cut; the names it has stay readable.
func TestGroupTableFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	k := Key("www", "a1")
	r, slots := openTest(t, path, k)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", MaxGroupName-len("node/pop=")-5)
	kept := 0
	for i := 0; ; i++ {
		name := fmt.Sprintf("node/pop=%s%05d", long, i)
		if _, err := r.Record(at.Add(time.Duration(i)*time.Second), []Obs{partObs(slots[0], name)}); err != nil {
			t.Fatal(err)
		}
		o, _, _, err := r.Read(slots[0], k, at)
		if err != nil {
			t.Fatal(err)
		}
		last := o.Points[len(o.Points)-1]
		if last.GroupsCut {
			if len(last.DownGroups) != 0 {
				t.Fatalf("a name the table has no room for is kept: %q", last.DownGroups)
			}
			break
		}
		if len(last.DownGroups) != 1 || last.DownGroups[0] != name {
			t.Fatalf("round %d: groups %q", i, last.DownGroups)
		}
		kept++
		if i > 1000 {
			t.Fatal("the group table never fills")
		}
	}
	if want := (groupTableSize - groupTableHead) / (1 + MaxGroupName); kept != want {
		t.Errorf("%d names of %d bytes kept, want %d", kept, MaxGroupName, want)
	}
	tooLong := strings.Repeat("y", MaxGroupName+1)
	if _, err := r.Record(at.Add(time.Hour), []Obs{partObs(slots[0], tooLong)}); err != nil {
		t.Fatal(err)
	}
	snap, err := ReadSnapshot(path)
	if err != nil {
		t.Fatalf("the full file: %v", err)
	}
	points := snap.Origins[k].Points
	if last := points[len(points)-1]; !last.GroupsCut || len(last.DownGroups) != 0 {
		t.Fatalf("a name longer than %d bytes: groups %q, cut %v; want none kept, cut", MaxGroupName, last.DownGroups, last.GroupsCut)
	}
}

// A failing write of the group table fails the round's write, as a
// failing record write does; the next round writes again.
func TestGroupTableWriteFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	k := Key("www", "a1")
	r, slots := openTest(t, path, k)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	write := r.writeAt
	r.writeAt = func([]byte, int64) (int, error) { return 0, fmt.Errorf("no space left on device") }
	if _, err := r.Record(at, []Obs{partObs(slots[0], "node/pop=eu")}); err == nil || !strings.Contains(err.Error(), "group table") {
		t.Fatalf("Record with a failing disk: %v, want an error naming the group table", err)
	}
	r.writeAt = write
	if _, err := r.Record(at.Add(time.Second), []Obs{partObs(slots[0], "node/pop=eu")}); err != nil {
		t.Fatal(err)
	}
	snap, err := ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	p := snap.Origins[k].Points
	if len(p) != 1 || !slices.Equal(p[0].DownGroups, []string{"node/pop=eu"}) {
		t.Fatalf("after the disk came back: %+v", p)
	}
}

// A file of version 2 (the testdata, written by the version 2 writer) is
// still read, its points with their votes and no partition data; an agent
// starts it again empty with a warning naming the version.
func TestVersion2File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	unpackVersion2(t, path)
	snap, err := ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 2 || snap.VoteSlots != 3 || snap.GroupSlots != 0 || len(snap.Origins) != 2 {
		t.Fatalf("version 2 snapshot: version %d, vote slots %d, group slots %d, %d origins", snap.Version, snap.VoteSlots, snap.GroupSlots, len(snap.Origins))
	}
	a1 := snap.Origins[Key("www", "a1")].Points
	if len(a1) != 14 {
		t.Fatalf("a1 has %d points, want 14", len(a1))
	}
	if p := a1[4]; p.Verdict != Up || p.By != 1 || len(p.Votes) != 2 || p.Votes[0] != (Tally{Source: 0, Up: 1, Down: 1}) || p.Partition || p.DownGroups != nil {
		t.Fatalf("a1's fifth round: %+v", p)
	}
	r, rep, err := Open(path, Options{Origins: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !strings.Contains(rep.Restarted, "format version 2") {
		t.Fatalf("Restarted = %q, want it to name version 2", rep.Restarted)
	}
}

// A file of version 3 (the testdata, written by the version 3 writer,
// rounds 500 ms apart) is still read, its times in whole seconds as that
// version kept them; an agent starts it again empty naming the version.
func TestVersion3File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	unpack(t, "version3.ring.gz", path)
	snap, err := ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 3 || snap.VoteSlots != 3 || snap.GroupSlots != 2 || len(snap.Origins) != 2 {
		t.Fatalf("version 3 snapshot: version %d, vote slots %d, group slots %d, %d origins", snap.Version, snap.VoteSlots, snap.GroupSlots, len(snap.Origins))
	}
	a1 := snap.Origins[Key("www", "a1")].Points
	if len(a1) != 10 {
		t.Fatalf("a1 has %d points, want 10", len(a1))
	}
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i, p := range a1 {
		if want := start.Add(time.Duration(i/2) * time.Second); !p.Time.Equal(want) {
			t.Errorf("a1's point %d at %s, want %s (whole seconds)", i, p.Time.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
		}
	}
	if p := a1[4]; p.Verdict != Down || p.State != Healthy || len(p.Votes) != 1 || p.Votes[0] != (Tally{Source: 0, Down: 2}) || p.Latency != 1500*time.Microsecond {
		t.Fatalf("a1's fifth round: %+v", p)
	}
	if p := a1[6]; p.State != Unhealthy {
		t.Fatalf("a1's seventh round: %+v", p)
	}
	r, rep, err := Open(path, Options{Origins: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !strings.Contains(rep.Restarted, "format version 3") {
		t.Fatalf("Restarted = %q, want it to name version 3", rep.Restarted)
	}
}

// unpackVersion2 writes testdata/version2.ring.gz, unpacked, to path.
func unpackVersion2(t *testing.T, path string) {
	t.Helper()
	unpack(t, "version2.ring.gz", path)
}

// unpack writes testdata/name, gunzipped, to path.
func unpack(t *testing.T, name, path string) {
	t.Helper()
	z, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
