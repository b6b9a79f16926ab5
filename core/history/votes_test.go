package history

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Each round keeps the tallies of the sources asked, in chain order, at
// most VoteSlots of them; counts saturate at 255.
func TestVoteTalliesRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	r, _, err := Open(path, Options{Origins: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k := Key("www", "a1")
	slots, err := r.Sync([]uint64{k})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	o1 := Obs{Slot: slots[0], Verdict: Down, By: 2, State: Unknown, NVotes: 3,
		Votes: [VoteSlots]Tally{{Source: 0, Up: 1, Down: 1, Abstain: 1}, {Source: 2, Up: 0, Down: 255, Abstain: 0}, {Source: 5, Up: 3}}}
	o2 := Obs{Slot: slots[0], Verdict: Unsettled, By: -1}
	if _, err := r.Record(at, []Obs{o1}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Record(at.Add(time.Second), []Obs{o2}); err != nil {
		t.Fatal(err)
	}
	got, ok, _, err := r.Read(slots[0], k, at)
	if err != nil || !ok || len(got.Points) != 2 {
		t.Fatalf("Read: %v %v %+v", ok, err, got)
	}
	want := o1.Votes[:]
	if v := got.Points[0].Votes; len(v) != 3 || v[0] != want[0] || v[1] != want[1] || v[2] != want[2] {
		t.Errorf("votes %+v, want %+v", v, want)
	}
	if v := got.Points[1].Votes; v == nil || len(v) != 0 {
		t.Errorf("a round without votes: %+v, want an empty list", v)
	}
	snap, err := ReadSnapshot(path)
	if err != nil || snap.Version != version || snap.VoteSlots != VoteSlots || len(snap.Origins[k].Points[0].Votes) != 3 {
		t.Fatalf("snapshot %+v, %v", snap, err)
	}
}

// writeV1 makes a file of format version 1 (no vote slots) holding one
// origin with one round.
func writeV1(t *testing.T, path string, k uint64, at time.Time) {
	t.Helper()
	l := makeLayout(60, 0, 0, 0, 1024)
	b := make([]byte, l.fileSize())
	h := l.encodeHeader(at)
	clear(h[60:72]) // version 3's group fields
	binary.LittleEndian.PutUint32(h[8:], 1)
	binary.LittleEndian.PutUint32(h[56:], crc32.Checksum(h[:56], castagnoli))
	copy(b, h)
	binary.LittleEndian.PutUint64(b[headerSize:], k)
	rec := b[l.recordAt(0):][:l.recordSize]
	binary.LittleEndian.PutUint64(rec, k)
	l.apply(rec, at.Unix(), 0, Obs{Verdict: Down, By: 0, State: Unhealthy})
	sealRecord(rec)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A version 1 file (before the vote slots) is read by an export, its
// points without votes, and an agent starts it again empty with a warning
// naming the version.
func TestVersion1File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	k := Key("www", "a1")
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	writeV1(t, path, k, at)
	snap, err := ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	p := snap.Origins[k].Points
	if snap.Version != 1 || snap.VoteSlots != 0 || len(p) != 1 || p[0].Verdict != Down || p[0].Votes != nil {
		t.Fatalf("version 1 snapshot: %+v %+v", snap, p)
	}
	r, rep, err := Open(path, Options{Origins: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !strings.Contains(rep.Restarted, "format version 1") {
		t.Fatalf("Restarted = %q, want it to name version 1", rep.Restarted)
	}
	if r.l.voteSlots != VoteSlots {
		t.Fatalf("the new file has %d vote slots", r.l.voteSlots)
	}
	if snap, err := ReadSnapshot(path); err != nil || snap.Version != version || len(snap.Origins) != 0 {
		t.Fatalf("after the restart: %+v %v", snap, err)
	}
}
