package history

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"
)

// Version 5 keeps each origin's rounds as runs: one entry for a stretch
// of rounds alike (the same verdict, settling source, state, partition
// groups and each asked source's up and down votes) that the origin was
// in at a fixed step of the file's rounds (every round, every third...),
// with its last round's number, the step and its round count. A round
// that differs starts a new run, and so does one at another step. The
// rounds' times come back exactly from the file's round table (the times
// of its last Rounds rounds, by round number); a run's rounds older than
// the table's oldest are let go.
const (
	// RunSlots is how many runs a record keeps: an origin that changes
	// more often keeps less time than the file's rounds reach.
	RunSlots = 40
	// RecentRounds is how many of an origin's last rounds keep their
	// latency (the status page's sparkline): a run keeps none.
	RecentRounds = 60
	// runSize is one run: its last round's number u32 (the file's
	// rounds counted from its first, modulo 2^32), the step between its
	// rounds u16 (in the file's rounds; 0 in a run of one round), verdict
	// u8 and state u8 (as a version 4 entry), its first round's time u32
	// (Unix seconds, for a reader's information), its round count u16,
	// VoteSlots vote slots of 4 bytes, GroupSlots group slots of 2.
	runSize     = 14 + VoteSlots*voteSlotSize + GroupSlots*groupSlotSize
	latencySize = 2
	// roundTableHead is the round table's head: rounds written u64, its
	// CRC-32C u32, rounds held u32; then one u64 a round in a ring, its
	// time in Unix milliseconds (48 bits) and a check of it and its round
	// number (16 bits).
	roundTableHead = 16
	// recordOverwritten is the flag (record byte 30) of a record that let
	// go of a run to make room.
	recordOverwritten = 1
	maxRunCount       = 0xffff
)

// roundTimes is the round table: the times of the file's last rounds, in
// Unix milliseconds, in a ring; the held newest of the total rounds
// written are kept, oldest first from total-held.
type roundTimes struct {
	times []int64 // a ring of len rounds
	total uint64  // rounds written
	held  int     // rounds kept: fewer than len after a clock went back
}

// maxRoundTime bounds a round's time: an entry keeps 48 bits of it (up to
// the year 10889), and a check of 16 bits.
const maxRoundTime = 1 << 48

// n is how many rounds the table holds.
func (t *roundTimes) n() int { return t.held }

// at is the i-th oldest round held.
func (t *roundTimes) at(i int) int64 {
	return t.times[(t.total-uint64(t.held)+uint64(i))%uint64(len(t.times))]
}

// add appends a round's time. A time equal to the last one is the same
// round (not added); a time before it is a clock that went back, and
// starts the table again from this round (the rounds before are let go,
// so that the table's times always rise). It returns the bytes to write
// and where, relative to the table: the entry, then the head; undo puts
// the table back as it was (for a write that failed).
func (t *roundTimes) add(ms int64) (entry []byte, entryAt int, head []byte, undo func(), ok bool) {
	if len(t.times) == 0 || ms < 0 || ms >= maxRoundTime {
		return nil, 0, nil, nil, false
	}
	i := int(t.total % uint64(len(t.times)))
	old, oldTotal, oldHeld := t.times[i], t.total, t.held
	undo = func() { t.times[i], t.total, t.held = old, oldTotal, oldHeld }
	if t.held > 0 {
		last := t.at(t.held - 1)
		if ms == last {
			return nil, 0, nil, nil, false
		}
		if ms < last {
			t.held = 0
		}
	}
	t.times[i] = ms
	t.total++
	t.held = min(t.held+1, len(t.times))
	entry = binary.LittleEndian.AppendUint64(nil, encodeRoundTime(t.total-1, ms))
	return entry, roundTableHead + 8*i, t.encodeHead(), undo, true
}

// encodeRoundTime is the table entry of round number k (counted from the
// file's first) at ms: the time in the low 48 bits, and in the high 16 a
// check of both, so that a damaged entry, or one of another round (a
// reader that met an entry written after the head it read), shows.
func encodeRoundTime(k uint64, ms int64) uint64 {
	return uint64(ms)&(maxRoundTime-1) | uint64(roundCheck(k, ms))<<48
}

func roundCheck(k uint64, ms int64) uint16 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], k)
	binary.LittleEndian.PutUint64(b[8:], uint64(ms)&(maxRoundTime-1))
	c := crc32.Checksum(b[:], castagnoli)
	return uint16(c ^ c>>16)
}

// decodeRoundTime is the time of round k from its entry; ok is false when
// the entry is not round k's.
func decodeRoundTime(k, v uint64) (ms int64, ok bool) {
	ms = int64(v & (maxRoundTime - 1))
	return ms, uint16(v>>48) == roundCheck(k, ms)
}

// encodeHead is the table's head: rounds written u64, the CRC-32C of the
// head's other 12 bytes u32, rounds held u32.
func (t *roundTimes) encodeHead() []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, t.total)
	binary.LittleEndian.PutUint32(b[12:], uint32(t.held))
	binary.LittleEndian.PutUint32(b[8:], headSum(b))
	return b
}

func headSum(b []byte) uint32 {
	return crc32.Update(crc32.Checksum(b[:8], castagnoli), castagnoli, b[12:16])
}

// resized is the table in a ring of rounds: the same rounds written, and
// its last rounds held, as many as it keeps.
func (t *roundTimes) resized(rounds int) roundTimes {
	n := roundTimes{times: make([]int64, rounds), total: t.total, held: min(t.held, rounds)}
	for k := t.total - uint64(n.held); k < t.total; k++ {
		n.times[k%uint64(rounds)] = t.times[k%uint64(len(t.times))]
	}
	return n
}

// encode is the whole table, size bytes (its head and every round held).
func (t *roundTimes) encode(size int) []byte {
	b := make([]byte, size)
	if t.total == 0 {
		return b
	}
	copy(b, t.encodeHead())
	for k := t.total - uint64(t.held); k < t.total; k++ {
		i := k % uint64(len(t.times))
		binary.LittleEndian.PutUint64(b[roundTableHead+8*i:], encodeRoundTime(k, t.times[i]))
	}
	return b
}

// decodeRoundTimes reads a round table region of rounds entries; bad says
// what is wrong with a damaged one. An all-zero head is an empty table.
// Each entry held must be its round's, and the times must rise; only the
// oldest may be rounds newer than the head counts, written in their slots
// before the head that counts them (a crash between the two writes, or a
// reader that read the head before the agent wrote): they are then let
// go.
func decodeRoundTimes(b []byte, rounds int) (roundTimes, string) {
	t := roundTimes{times: make([]int64, rounds)}
	le := binary.LittleEndian
	if rounds < 1 || len(b) < roundTableHead+8*rounds {
		return t, "its round table is cut short"
	}
	total, held := le.Uint64(b), uint64(le.Uint32(b[12:]))
	if total == 0 && held == 0 && le.Uint32(b[8:]) == 0 {
		return t, ""
	}
	if headSum(b) != le.Uint32(b[8:]) {
		return t, "its round table has a damaged head"
	}
	if held > total || held > uint64(rounds) {
		return t, "its round table's head counts more rounds than it holds"
	}
	t.total, t.held = total, int(held)
	from := total - held
	prev := int64(-1)
	for k := from; k < total; k++ {
		i := k % uint64(rounds)
		v := le.Uint64(b[roundTableHead+8*i:])
		ms, ok := decodeRoundTime(k, v)
		if !ok && prev < 0 && held == uint64(rounds) {
			if _, next := decodeRoundTime(k+uint64(rounds), v); next {
				t.held-- // a newer round than the head counts
				continue
			}
		}
		if !ok {
			return t, fmt.Sprintf("its round table's entry of round %d is damaged", k)
		}
		if ms <= prev {
			return t, fmt.Sprintf("its round table's times do not rise at round %d", k)
		}
		t.times[i], prev = ms, ms
	}
	return t, ""
}

// runAt is run i of a record.
func runAt(rec []byte, i int) []byte { return rec[recordHead+i*runSize:][:runSize] }

// sameRun says the round entry b (a new run) repeats run a: the same
// verdict, source, state and flags, groups, and per source the same up and
// down votes. Abstentions may differ (a node out of time abstains): the
// run keeps its first round's.
func sameRun(a, b []byte) bool {
	if a[6] != b[6] || a[7] != b[7] {
		return false
	}
	for k := range VoteSlots {
		x, y := a[14+k*voteSlotSize:], b[14+k*voteSlotSize:]
		if x[0] != y[0] || x[1] != y[1] || x[2] != y[2] {
			return false
		}
	}
	g := 14 + VoteSlots*voteSlotSize
	return string(a[g:runSize]) == string(b[g:runSize])
}

// follows says round number cur keeps run a's step: the next round of a
// run of one round, whatever its step (up to 65,535 rounds), else exactly
// the run's step after its last round.
func follows(a []byte, cur uint32) bool {
	le := binary.LittleEndian
	last, step, count := le.Uint32(a), uint32(le.Uint16(a[4:])), le.Uint16(a[12:])
	d := cur - last
	if count >= maxRunCount || d == 0 || d > 0xffff {
		return false
	}
	return count < 2 || d == step
}

// applyRun adds one round, the file's round number round at unix, to a
// record of version 5.
func (l layout) applyRun(rec []byte, unix int64, round uint32, o Obs) {
	le := binary.LittleEndian
	var e [runSize]byte
	le.PutUint32(e[:], round)
	le.PutUint32(e[8:], uint32(max(unix, 0)))
	by := int(o.By) + 1
	if by < 0 || by > 63 {
		by = 0
	}
	e[6] = byte(o.Verdict&3) | byte(by)<<2
	e[7] = byte(o.State & 3)
	le.PutUint16(e[12:], 1)
	for k := 0; k < int(o.NVotes) && k < VoteSlots; k++ {
		v := o.Votes[k]
		if v.Source < 0 || int(v.Source) >= 254 {
			continue
		}
		slot := e[14+k*voteSlotSize:]
		slot[0], slot[1], slot[2], slot[3] = byte(v.Source)+1, v.Up, v.Down, v.Abstain
	}
	if o.Partition {
		e[7] |= statePartition
		if o.GroupsCut {
			e[7] |= stateGroupsCut
		}
		at := 14 + VoteSlots*voteSlotSize
		for k := range GroupSlots {
			le.PutUint16(e[at+k*groupSlotSize:], o.groupIDs[k])
		}
	}
	head, count := int(le.Uint16(rec[12:])), int(le.Uint16(rec[14:]))
	if head >= l.runSlots {
		head = 0
	}
	count = min(count, l.runSlots)
	if last := runAt(rec, (head-1+l.runSlots)%l.runSlots); count > 0 && sameRun(last, e[:]) && follows(last, round) {
		le.PutUint16(last[4:], uint16(round-le.Uint32(last)))
		le.PutUint32(last, round)
		le.PutUint16(last[12:], le.Uint16(last[12:])+1)
	} else {
		copy(runAt(rec, head), e[:])
		le.PutUint16(rec[12:], uint16((head+1)%l.runSlots))
		if count == l.runSlots {
			rec[30] |= recordOverwritten
		}
		le.PutUint16(rec[14:], uint16(min(count+1, l.runSlots)))
	}
	lh, lc := int(rec[28]), int(rec[29])
	if lh >= l.recent {
		lh = 0
	}
	le.PutUint16(rec[l.latAt+lh*latencySize:], latencyUnits(o.Latency))
	rec[28], rec[29] = byte((lh+1)%l.recent), byte(min(lc+1, l.recent))
	for t := range Tiers {
		l.bump(rec, t, unix, o.Verdict)
	}
}

// decodeRuns reads a sound record of version 5: its runs, each as its
// rounds that the round table still holds, at their times in the table
// (nothing is kept without one); with last > 0 only the last rounds are
// made points.
func (l layout) decodeRuns(rec []byte, now int64, names []string, rt *roundTimes, last int) Origin {
	le := binary.LittleEndian
	head, count := int(le.Uint16(rec[12:])), min(int(le.Uint16(rec[14:])), l.runSlots)
	head = min(head, l.runSlots-1)
	o := Origin{Windows: l.windows(rec, now)}
	var newest uint32 // the newest round's number
	held := 0
	if rt != nil && rt.held > 0 && len(rt.times) > 0 {
		newest, held = uint32(rt.total-1), rt.held
	}
	// timeOf is the time of the round d rounds before the newest.
	timeOf := func(d uint64) int64 { return rt.times[(rt.total-1-d)%uint64(len(rt.times))] }
	// The runs oldest first, and how many of each run's last rounds the
	// table holds.
	type run struct {
		e          []byte
		back, step uint64 // the run's last round is back rounds before the newest
		kept       int
	}
	runs := make([]run, 0, count)
	clipped := false
	for k := range count {
		e := runAt(rec, (head-count+k+2*l.runSlots)%l.runSlots)
		if e[6]&3 == 0 {
			continue
		}
		back, step := int64(int32(newest-le.Uint32(e))), int64(max(le.Uint16(e[4:]), 1))
		n := int(max(le.Uint16(e[12:]), 1))
		if back < 0 {
			// Rounds written after the table was read (a reader beside
			// the agent): not known yet, left out.
			m := (-back + step - 1) / step
			back += m * step
			n -= int(min(m, int64(n)))
		}
		r := run{e: e, back: uint64(back), step: uint64(step)}
		if n > 0 && r.back < uint64(held) {
			r.kept = int(min(uint64(n), (uint64(held)-1-r.back)/r.step+1))
		}
		if r.kept < n {
			clipped = true
		}
		if n <= 0 {
			continue
		}
		if r.kept > 0 {
			runs = append(runs, r)
			o.Kept += r.kept
		}
	}
	o.Runs = len(runs)
	if len(runs) > 0 {
		r := runs[0]
		o.KeptSince = time.UnixMilli(timeOf(r.back + r.step*uint64(r.kept-1))).UTC()
	}
	need := o.Kept
	if last > 0 {
		need = min(last, o.Kept)
	}
	o.Points = make([]Point, 0, need)
	skip := o.Kept - need // kept rounds before the first point wanted
	for _, r := range runs {
		if skip >= r.kept {
			skip -= r.kept
			continue
		}
		e := r.e
		p := Point{Verdict: Verdict(e[6] & 3), By: int8(e[6]>>2) - 1, State: State(e[7] & 3), Votes: []Tally{}}
		for k := range VoteSlots {
			slot := e[14+k*voteSlotSize:]
			if slot[0] == 0 {
				break
			}
			p.Votes = append(p.Votes, Tally{Source: int8(slot[0] - 1), Up: slot[1], Down: slot[2], Abstain: slot[3]})
		}
		if e[7]&statePartition != 0 {
			p.Partition, p.GroupsCut = true, e[7]&stateGroupsCut != 0
			p.DownGroups = []string{}
			at := 14 + VoteSlots*voteSlotSize
			for k := range GroupSlots {
				id := int(le.Uint16(e[at+k*groupSlotSize:]))
				if id == 0 {
					break
				}
				if id > len(names) {
					p.GroupsCut = true // a name written after the table was read
					continue
				}
				p.DownGroups = append(p.DownGroups, names[id-1])
			}
		}
		// The run's kept rounds, from the first one wanted.
		for j := skip; j < r.kept; j++ {
			p.Time = time.UnixMilli(timeOf(r.back + r.step*uint64(r.kept-1-j))).UTC()
			o.Points = append(o.Points, p)
		}
		skip = 0
	}
	lh, lc := int(rec[28]), min(int(rec[29]), l.recent)
	// The latencies are of the origin's last rounds, the last points.
	for k := 0; k < lc && k < len(o.Points) && k < o.Kept; k++ {
		i := (lh - 1 - k + 2*l.recent) % l.recent
		o.Points[len(o.Points)-1-k].Latency = time.Duration(le.Uint16(rec[l.latAt+i*latencySize:])) * 100 * time.Microsecond
	}
	o.Cut = rec[30]&recordOverwritten != 0 && !clipped
	o.Since = l.since(rec, now, o.KeptSince, rec[30]&recordOverwritten == 0 && !clipped)
	return o
}
