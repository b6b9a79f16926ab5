package history

import (
	"encoding/binary"
	"testing"
	"time"
)

// FuzzRoundTable decodes any bytes as a round table and a record of runs:
// never a panic, and a table that decodes holds rising times, no more
// than its rounds; the record's points then rise too.
func FuzzRoundTable(f *testing.F) {
	l := newLayout(8, 1)
	rt := roundTimes{times: make([]int64, 8)}
	table := make([]byte, roundTableHead+8*8)
	rec := make([]byte, l.recordSize)
	binary.LittleEndian.PutUint64(rec, 1)
	base := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for i := range 12 {
		at := base.Add(time.Duration(i) * 10 * time.Second)
		entry, off, head, _, _ := rt.add(at.UnixMilli())
		copy(table[off:], entry)
		copy(table, head)
		if i%3 == 0 {
			o := Obs{Verdict: Up, State: Healthy, NVotes: 1}
			o.Votes[0] = Tally{Up: 3}
			l.applyRun(rec, at.Unix(), uint32(i), o)
		}
	}
	f.Add(table, rec[recordHead:l.latAt])
	f.Add(make([]byte, len(table)), make([]byte, 0))
	f.Fuzz(func(t *testing.T, table, runs []byte) {
		rt, bad := decodeRoundTimes(table, 8)
		if bad != "" {
			return
		}
		if rt.n() > 8 || uint64(rt.n()) > rt.total {
			t.Fatalf("%d rounds held of %d written, in a table of 8", rt.n(), rt.total)
		}
		for i := 1; i < rt.n(); i++ {
			if rt.at(i) <= rt.at(i-1) {
				t.Fatalf("round %d at %d is not after %d", i, rt.at(i), rt.at(i-1))
			}
		}
		rec := make([]byte, l.recordSize)
		copy(rec[recordHead:l.latAt], runs)
		binary.LittleEndian.PutUint16(rec[14:], RunSlots)
		o := l.decodeRuns(rec, base.Unix(), nil, &rt, 0)
		if len(o.Points) != o.Kept {
			t.Fatalf("%d points, %d kept", len(o.Points), o.Kept)
		}
	})
}
