package history

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sort"
	"time"
)

// Version 5 keeps each origin's rounds as runs: one entry for a stretch
// of rounds alike (the same verdict, settling source, state, partition
// groups and each asked source's up and down votes), with its first
// round's time, its last round's time and its round count. A round that
// differs starts a new run, and so does one that does not follow the run's
// spacing (a gap in the data: the agent was stopped, say), so that the
// rounds inside a run are evenly spaced between its first and last to a
// quarter of that spacing. Their exact times come back from the file's
// round table (the times of its last Rounds rounds), as long as it
// reaches back to them.
const (
	// RunSlots is how many runs a record keeps: an origin that changes
	// more often keeps less time than the file's rounds reach.
	RunSlots = 40
	// RecentRounds is how many of an origin's last rounds keep their
	// latency (the status page's sparkline): a run keeps none.
	RecentRounds = 60
	// runSize is one run: first time u32 (Unix seconds) and u16
	// (milliseconds), verdict u8 and state u8 (as a version 4 entry), the
	// time from its first round to its last u32 (milliseconds), its round
	// count u16, VoteSlots vote slots of 4 bytes, GroupSlots group slots
	// of 2.
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

// wrapped says older rounds were let go: the table reaches back only to
// at(0).
func (t *roundTimes) wrapped() bool { return t.total > uint64(t.held) }

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
	if t.held > 0 {
		last := t.at(t.held - 1)
		if ms == last {
			return nil, 0, nil, nil, false
		}
		if ms < last {
			t.held = 0
		}
	}
	i := int(t.total % uint64(len(t.times)))
	old, oldTotal, oldHeld := t.times[i], t.total, t.held
	undo = func() { t.times[i], t.total, t.held = old, oldTotal, oldHeld }
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

// decodeRoundTimes reads a round table region of rounds entries; bad says
// what is wrong with a damaged one. An all-zero head is an empty table.
// Each entry held must be its round's, and the times must rise; only the
// oldest may be the next round's, written before the head that counts it
// (a crash between the two writes, or a reader between them): it is then
// let go.
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
		if !ok && k == from && held == uint64(rounds) {
			if _, next := decodeRoundTime(k+uint64(rounds), v); next {
				t.held--
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

// expand gives the times of a run's count rounds from first to first+span
// (milliseconds): the table's own when it holds exactly count rounds
// between them, else evenly spaced, each moved to the table's round
// nearest to it when that is within a quarter of the spacing. Only the
// rounds from the from-th (0 the first) are given.
func (t *roundTimes) expand(first, span int64, count, from int, out []int64) []int64 {
	out = slices.Grow(out, count-from)
	if count <= 1 {
		if from > 0 {
			return out
		}
		return append(out, first)
	}
	last := first + span
	n := t.n()
	lo := sort.Search(n, func(i int) bool { return t.at(i) >= first })
	hi := sort.Search(n, func(i int) bool { return t.at(i) > last })
	if hi-lo == count && t.at(lo) == first && t.at(hi-1) == last {
		for i := lo + from; i < hi; i++ {
			out = append(out, t.at(i))
		}
		return out
	}
	tol := span / int64(count-1) / 4
	prev := int64(-1 << 62)
	for i := range count { // from the first: each place depends on the one before
		e := first + span*int64(i)/int64(count-1)
		if i > 0 && i < count-1 && lo < hi {
			j := lo + sort.Search(hi-lo, func(k int) bool { return t.at(lo+k) >= e })
			best := int64(-1)
			for _, c := range []int{j - 1, j} {
				if c >= lo && c < hi {
					if v := t.at(c); abs64(v-e) <= tol && (best < 0 || abs64(v-e) < abs64(best-e)) {
						best = v
					}
				}
			}
			if best > prev {
				e = best
			}
		}
		e = max(e, prev+1)
		if i >= from {
			out = append(out, e)
		}
		prev = e
	}
	return out
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// runAt is run i of a record.
func runAt(rec []byte, i int) []byte { return rec[recordHead+i*runSize:][:runSize] }

func runFirst(e []byte) int64 {
	le := binary.LittleEndian
	return int64(le.Uint32(e))*1000 + int64(min(le.Uint16(e[4:]), 999))
}

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

// follows says a round at ms keeps run a's spacing: after its last round,
// by its mean spacing give or take a quarter (any time after a run of one
// round: a run of two has no round between to place).
func follows(a []byte, ms int64) bool {
	le := binary.LittleEndian
	first, span, count := runFirst(a), int64(le.Uint32(a[8:])), int64(le.Uint16(a[12:]))
	last := first + span
	if count >= maxRunCount || ms <= last || ms-first > 0xffffffff {
		return false
	}
	if count < 2 {
		return true
	}
	// |gap - span/(count-1)| <= span/(count-1)/4, in integers.
	gap := ms - last
	return 4*abs64(gap*(count-1)-span) <= span
}

// applyRun adds one round to a record of version 5.
func (l layout) applyRun(rec []byte, unix int64, ms uint16, o Obs) {
	le := binary.LittleEndian
	var e [runSize]byte
	le.PutUint32(e[:], uint32(max(unix, 0)))
	le.PutUint16(e[4:], min(ms, 999))
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
	at := max(unix, 0)*1000 + int64(min(ms, 999))
	head, count := int(le.Uint16(rec[12:])), int(le.Uint16(rec[14:]))
	if head >= l.runSlots {
		head = 0
	}
	count = min(count, l.runSlots)
	if last := runAt(rec, (head-1+l.runSlots)%l.runSlots); count > 0 && sameRun(last, e[:]) && follows(last, at) {
		le.PutUint32(last[8:], uint32(at-runFirst(last)))
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
// rounds, from the oldest the round table still holds (rt may be empty:
// then every round kept); with last > 0 only the last rounds are
// expanded into points.
func (l layout) decodeRuns(rec []byte, now int64, names []string, rt *roundTimes, last int) Origin {
	le := binary.LittleEndian
	head, count := int(le.Uint16(rec[12:])), min(int(le.Uint16(rec[14:])), l.runSlots)
	head = min(head, l.runSlots-1)
	o := Origin{Windows: l.windows(rec, now)}
	clip := int64(-1 << 62)
	if rt != nil && rt.wrapped() {
		clip = rt.at(0)
	}
	if rt == nil {
		rt = &roundTimes{}
	}
	// The runs oldest first, and how many of each run's rounds are kept
	// (only a run that straddles the oldest round kept is expanded here).
	type run struct {
		e           []byte
		first, span int64
		count, kept int
	}
	runs := make([]run, 0, count)
	var times []int64
	clipped := false
	for k := range count {
		e := runAt(rec, (head-count+k+2*l.runSlots)%l.runSlots)
		if e[6]&3 == 0 {
			continue
		}
		r := run{e: e, first: runFirst(e), span: int64(le.Uint32(e[8:])), count: int(max(le.Uint16(e[12:]), 1))}
		switch {
		case r.first >= clip:
			r.kept = r.count
		case r.first+r.span < clip:
			clipped = true
		default:
			clipped = true
			times = rt.expand(r.first, r.span, r.count, 0, times[:0])
			for _, ms := range times {
				if ms >= clip {
					r.kept++
				}
			}
		}
		if r.kept > 0 {
			runs = append(runs, r)
			o.Kept += r.kept
		}
	}
	o.Runs = len(runs)
	need := o.Kept
	if last > 0 {
		need = min(last, o.Kept)
	}
	o.Points = make([]Point, 0, need)
	skip := o.Kept - need // kept rounds before the first point wanted
	for i, r := range runs {
		if i == 0 || skip >= r.kept {
			// The first kept round's time, for KeptSince.
			if i == 0 && r.first >= clip {
				o.KeptSince = time.UnixMilli(r.first).UTC()
			} else if i == 0 {
				times = rt.expand(r.first, r.span, r.count, r.count-r.kept, times[:0])
				for _, ms := range times {
					if ms >= clip {
						o.KeptSince = time.UnixMilli(ms).UTC()
						break
					}
				}
			}
			if skip >= r.kept {
				skip -= r.kept
				continue
			}
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
		// The run's last kept rounds, from the first one wanted.
		times = rt.expand(r.first, r.span, r.count, r.count-r.kept+skip, times[:0])
		skip = 0
		for _, ms := range times {
			p.Time = time.UnixMilli(ms).UTC()
			o.Points = append(o.Points, p)
		}
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
