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

// writeV4 makes a file of format version 4 (60 round entries an origin,
// with milliseconds) holding one origin with the given rounds, written by
// the version 4 writer (apply).
func writeV4(t *testing.T, path string, k uint64, times []time.Time, obs []Obs) {
	t.Helper()
	l := buildLayout(60, VoteSlots, GroupSlots, groupTableSize, 1024, true)
	b := make([]byte, l.fileSize())
	h := l.encodeHeader(times[0])
	binary.LittleEndian.PutUint32(h[8:], 4)
	binary.LittleEndian.PutUint32(h[56:], crc32.Checksum(h[:56], castagnoli))
	copy(b, h)
	binary.LittleEndian.PutUint64(b[l.indexAt():], k)
	rec := b[l.recordAt(0):][:l.recordSize]
	binary.LittleEndian.PutUint64(rec, k)
	for i, at := range times {
		l.apply(rec, at.Unix(), uint16(at.Nanosecond()/1e6), obs[i])
	}
	sealRecord(rec)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A version 4 file is read by an export, every round with its time, votes
// and latency; an agent starts it again empty with a warning naming the
// version.
func TestVersion4File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	k := Key("www", "a1")
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	var times []time.Time
	var obs []Obs
	for i := range 70 {
		times = append(times, t0.Add(time.Duration(i)*30*time.Second+time.Duration(i)*time.Millisecond))
		o := Obs{Verdict: Up, By: 0, State: Healthy, Latency: time.Duration(i) * time.Millisecond, NVotes: 1}
		o.Votes[0] = Tally{Source: 0, Up: 2, Abstain: uint8(i % 2)}
		obs = append(obs, o)
	}
	writeV4(t, path, k, times, obs)
	snap, err := ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	o := snap.Origins[k]
	if snap.Version != 4 || snap.Rounds != 60 || len(o.Points) != 60 || o.Kept != 60 || !o.KeptSince.Equal(times[10]) {
		t.Fatalf("version 4 snapshot: version %d, rounds %d, %d points, kept %d since %v", snap.Version, snap.Rounds, len(o.Points), o.Kept, o.KeptSince)
	}
	for i, p := range o.Points {
		j := 10 + i
		if !p.Time.Equal(times[j]) || p.Latency != obs[j].Latency || len(p.Votes) != 1 || p.Votes[0].Abstain != obs[j].Votes[0].Abstain {
			t.Fatalf("point %d: %+v, want round %d", i, p, j)
		}
	}
	r, rep, err := Open(path, Options{Origins: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !strings.Contains(rep.Restarted, "it has format version 4, this agent writes 5") {
		t.Fatalf("Restarted = %q, want it to name version 4", rep.Restarted)
	}
	if snap, err := ReadSnapshot(path); err != nil || snap.Version != version || len(snap.Origins) != 0 {
		t.Fatalf("after the restart: %+v %v", snap, err)
	}
}
