package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"
)

// Verdict is a round's verdict as the file keeps it.
type Verdict uint8

// The verdicts. 0 marks an empty entry.
const (
	Up        Verdict = 1
	Down      Verdict = 2
	Unsettled Verdict = 3 // no source settled the origin (verdict "none")
)

func (v Verdict) String() string {
	switch v {
	case Up:
		return "up"
	case Down:
		return "down"
	case Unsettled:
		return "none"
	}
	return "empty"
}

// State is an origin's state after a round, as the file keeps it.
type State uint8

// The states, as the engine names them.
const (
	Unknown State = iota
	Healthy
	Unhealthy
	Disabled
)

func (s State) String() string {
	return [...]string{"unknown", "healthy", "unhealthy", "disabled"}[s&3]
}

// Tally is one source's votes for one origin in one round.
type Tally struct {
	Source            int8  // chain index
	Up, Down, Abstain uint8 // saturating at 255
}

// Obs is one origin's outcome in one round, for Record.
type Obs struct {
	Slot    int32 // from Sync; negative: not kept
	Verdict Verdict
	By      int8 // chain index of the settling source, -1 for none
	State   State
	Latency time.Duration
	// Votes are the tallies of the sources asked, in chain order; the
	// first NVotes count (at most VoteSlots are kept).
	Votes  [VoteSlots]Tally
	NVotes uint8
	// Partition is set when the path-partition rule ran for the round
	// (control { partition }): DownGroups are then the rule's groups
	// (docs/partition.md) whose every vote was down, kept only in a round
	// with an up vote (without one no group is alone), in the order the
	// rule met them; the first NDown count, and GroupsCut says the round
	// had more than GroupSlots of them (or a name the file could not
	// keep), left out.
	Partition  bool
	DownGroups [GroupSlots]string
	NDown      uint8
	GroupsCut  bool

	groupIDs [GroupSlots]uint16 // each kept group's number + 1, set by Record
}

// Point is one kept round of one origin.
type Point struct {
	Time    time.Time // to the millisecond from version 4, the second before
	Verdict Verdict
	By      int8
	State   State
	Latency time.Duration
	// Votes are the round's tallies of the sources asked, in chain order
	// (nil in a file of version 1, which kept none).
	Votes []Tally
	// Partition is set when the path-partition rule ran for the round
	// (never in a file before version 3): DownGroups are then the groups
	// whose every vote was down in a round with an up vote (see Obs), and
	// GroupsCut says some were left out.
	Partition  bool
	DownGroups []string
	GroupsCut  bool
}

// Window counts the judged rounds of an uptime window.
type Window struct{ Up, Down int }

// Uptime is the share of up verdicts in w, in per cent; ok is false when
// the window has no judged round (an unsettled round counts as neither).
func (w Window) Uptime() (pct float64, ok bool) {
	n := w.Up + w.Down
	if n == 0 {
		return 0, false
	}
	return 100 * float64(w.Up) / float64(n), true
}

// The windows of Origin.Windows, one per tier.
const (
	Window1h = iota
	Window24h
	Window7d
)

// Origin is what the file holds of one origin.
type Origin struct {
	// Points are its kept rounds, oldest first: from version 5 those of
	// its runs that the file's rounds still reach, each with the run's
	// verdict, state and tallies, and a latency only in the last
	// RecentRounds.
	Points  []Point
	Windows [3]Window
	// Cut says the origin changed more often than its RunSlots runs hold
	// (version 5): its oldest runs were let go, and Points begin later
	// than the file's rounds reach.
	Cut bool
	// Runs is how many runs of rounds alike the points come from
	// (version 5; before, one a point).
	Runs int
	// Kept is how many rounds the file keeps of the origin, and KeptSince
	// the time of the oldest: Points holds them all, or the last of them
	// (ReadLast).
	Kept      int
	KeptSince time.Time
	// Since is when the origin's judged data begins, as far as the file
	// can tell: its first kept round while the ring has not wrapped, else
	// the start of the oldest counter bucket with a verdict in the finest
	// tier that does not reach back to its window's start (to 10 minutes,
	// 1 hour or 6 hours); the start of the 7 d window when every tier
	// does. The zero time when the origin has no verdict. An uptime over
	// a window longer than now minus Since covers only that much.
	Since time.Time
}

// Options configure Open.
type Options struct {
	// Rounds is how many rounds the file keeps (DefaultRounds when 0):
	// the last Rounds rounds of the agent, of every origin probed in them,
	// as far as each origin's RunSlots runs reach.
	Rounds int
	// Origins is how many origins the file must hold now: a new file gets
	// room for a quarter more, and a smaller file is made larger.
	Origins int
}

// Report says what Open found.
type Report struct {
	Path string
	// Created is set when there was no file.
	Created bool
	// Restarted says why an unusable file was replaced by an empty one
	// ("" when it was usable).
	Restarted string
	// Grown is set when the file was copied into a larger one.
	Grown bool
	// Resized is the rounds the file kept when it kept another number
	// than Options.Rounds (0 when not): it was copied into one keeping
	// Options.Rounds, with its records and its last rounds' times.
	Resized  int
	Capacity int
	Size     int64
}

// Ring is an open history file. Its methods are safe for concurrent use.
type Ring struct {
	mu   sync.Mutex
	f    *os.File
	path string
	l    layout
	keys []uint64 // by slot; 0 free
	free []int32  // free slots, lowest first
	// groups are the names of the voter groups the file keeps.
	groups groupTable
	// rt is the round table (the times of the last rounds).
	rt  roundTimes
	buf []byte // one chunk of records
	// writeAt writes to the file (a test replaces it to fail writes).
	writeAt func(b []byte, off int64) (int, error)
}

var errClosed = errors.New("history: the file is closed")

// chunkSlots is how many neighbouring records one read and one write of
// Record cover at most.
const chunkSlots = 64

// gapSlots is how many unused records a chunk may carry between two used
// ones, read and written back as they are, to save system calls.
const gapSlots = 8

// capacityFor is the slot count a new file gets for origins.
func capacityFor(origins int) int {
	want := origins + origins/4
	return max(1024, (want+1023)/1024*1024)
}

// Open opens the history file at path, or makes it. A file that cannot be
// used (damaged, cut short, another format) is replaced by an empty one,
// and the report says why; one of too few slots or another number of
// rounds is copied into one of the size asked, its records kept; an error means no
// file could be made at all (permissions, a full disk), and the caller
// goes on without history.
func Open(path string, o Options) (*Ring, Report, error) {
	if o.Rounds <= 0 {
		o.Rounds = DefaultRounds
	}
	if o.Rounds > MaxRounds {
		return nil, Report{Path: path}, fmt.Errorf("history: %d rounds is more than %d", o.Rounds, MaxRounds)
	}
	rep := Report{Path: path}
	r, why, err := openExisting(path, o)
	switch {
	case err == nil && why == "":
		if r.l.capacity < o.Origins || r.l.rounds != o.Rounds {
			old := r.l
			nl := newLayout(o.Rounds, old.capacity)
			if old.capacity < o.Origins {
				nl.capacity = capacityFor(o.Origins)
			}
			if err := r.reshape(nl); err != nil {
				r.Close()
				return nil, rep, err
			}
			rep.Grown = nl.capacity > old.capacity
			if old.rounds != nl.rounds {
				rep.Resized = old.rounds
			}
		}
	case errors.Is(err, fs.ErrNotExist):
		rep.Created = true
	case err != nil:
		return nil, rep, err
	default:
		rep.Restarted = why
	}
	if r == nil {
		if r, err = create(path, newLayout(o.Rounds, capacityFor(o.Origins))); err != nil {
			return nil, rep, err
		}
	}
	rep.Capacity, rep.Size = r.l.capacity, r.l.fileSize()
	return r, rep, nil
}

// openExisting opens a file that is there: why says what makes it
// unusable.
func openExisting(path string, o Options) (r *Ring, why string, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, "", fmt.Errorf("history: %w", err)
	}
	fail := func(w string) (*Ring, string, error) {
		f.Close()
		return nil, w, nil
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, "", fmt.Errorf("history: %w", err)
	}
	hb := make([]byte, headerSize)
	if _, err := f.ReadAt(hb, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return fail(fmt.Sprintf("the file is cut short (%d bytes)", st.Size()))
		}
		f.Close()
		return nil, "", fmt.Errorf("history: reading %s: %w", path, err)
	}
	h, bad := decodeHeader(hb, false)
	if bad != "" {
		return fail(bad)
	}
	if want := h.fileSize(); st.Size() != want {
		return fail(fmt.Sprintf("the file is %d bytes but its header makes it %d: it was cut or overwritten", st.Size(), want))
	}
	if h.voteSlots != VoteSlots {
		return fail(fmt.Sprintf("it keeps %d vote slots a round and this agent keeps %d", h.voteSlots, VoteSlots))
	}
	if h.groupSlots != GroupSlots || h.groupTable != groupTableSize {
		return fail(fmt.Sprintf("it keeps %d group slots a round and %d bytes of group names, and this agent %d and %d", h.groupSlots, h.groupTable, GroupSlots, groupTableSize))
	}
	tb := make([]byte, h.groupTable)
	if _, err := f.ReadAt(tb, headerSize); err != nil {
		f.Close()
		return nil, "", fmt.Errorf("history: reading %s: %w", path, err)
	}
	groups, bad := decodeGroups(tb)
	if bad != "" {
		return fail(bad)
	}
	rb := make([]byte, h.roundTable)
	if _, err := f.ReadAt(rb, h.roundTableAt()); err != nil {
		f.Close()
		return nil, "", fmt.Errorf("history: reading %s: %w", path, err)
	}
	rt, bad := decodeRoundTimes(rb, h.rounds)
	if bad != "" {
		return fail(bad)
	}
	ib := make([]byte, h.capacity*8)
	if _, err := f.ReadAt(ib, h.indexAt()); err != nil {
		f.Close()
		return nil, "", fmt.Errorf("history: reading %s: %w", path, err)
	}
	keys := make([]uint64, h.capacity)
	seen := make(map[uint64]struct{}, h.capacity/2)
	for i := range keys {
		k := binary.LittleEndian.Uint64(ib[8*i:])
		if k == 0 {
			continue
		}
		if _, dup := seen[k]; dup {
			return fail("its index names one origin twice: the index is damaged")
		}
		seen[k] = struct{}{}
		keys[i] = k
	}
	r = newRing(f, path, h.layout, keys)
	r.groups, r.rt = groups, rt
	return r, "", nil
}

func newRing(f *os.File, path string, l layout, keys []uint64) *Ring {
	r := &Ring{f: f, path: path, l: l, keys: keys, buf: make([]byte, chunkSlots*l.recordSize),
		groups: groupTable{ids: map[string]uint16{}, size: l.groupTable}, rt: roundTimes{times: make([]int64, l.rounds)}}
	r.writeAt = f.WriteAt
	r.rebuildFree()
	return r
}

func (r *Ring) rebuildFree() {
	r.free = r.free[:0]
	for i, k := range r.keys {
		if k == 0 {
			r.free = append(r.free, int32(i))
		}
	}
}

// create makes a new empty file at path (through a temporary file, so
// that a crash leaves either the old file or the whole new one).
func create(path string, l layout) (*Ring, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	fail := func(err error) (*Ring, error) {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("history: making %s (%d bytes): %w", path, l.fileSize(), err)
	}
	if err := reserve(f, l.fileSize()); err != nil {
		return fail(err)
	}
	if _, err := f.WriteAt(l.encodeHeader(time.Now()), 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	return newRing(f, path, l, make([]uint64, l.capacity)), nil
}

// grow copies the file into a larger one of capacity slots and switches
// to it.
func (r *Ring) grow(capacity int) error {
	nl := r.l
	nl.capacity = capacity
	return r.reshape(nl)
}

// reshape copies the file into one of layout nl (more slots, or another
// number of rounds) and switches to it: the group table, index and
// records as they are, and the round table's last rounds, as many as nl
// keeps.
func (r *Ring) reshape(nl layout) error {
	n, err := create(r.path+".grow", nl)
	if err != nil {
		return err
	}
	rt := r.rt.resized(nl.rounds)
	ib := make([]byte, len(r.keys)*8)
	for i, k := range r.keys {
		binary.LittleEndian.PutUint64(ib[8*i:], k)
	}
	err = func() error {
		tb := make([]byte, r.l.groupTable)
		if _, err := r.f.ReadAt(tb, headerSize); err != nil {
			return err
		}
		if _, err := n.f.WriteAt(tb, headerSize); err != nil {
			return err
		}
		if _, err := n.f.WriteAt(rt.encode(nl.roundTable), nl.roundTableAt()); err != nil {
			return err
		}
		if _, err := n.f.WriteAt(ib, n.l.indexAt()); err != nil {
			return err
		}
		buf := make([]byte, chunkSlots*r.l.recordSize)
		for s := 0; s < r.l.capacity; s += chunkSlots {
			k := min(chunkSlots, r.l.capacity-s)
			b := buf[:k*r.l.recordSize]
			if _, err := r.f.ReadAt(b, r.l.recordAt(s)); err != nil {
				return err
			}
			if _, err := n.f.WriteAt(b, n.l.recordAt(s)); err != nil {
				return err
			}
		}
		if err := n.f.Sync(); err != nil {
			return err
		}
		return os.Rename(r.path+".grow", r.path)
	}()
	if err != nil {
		n.Close()
		os.Remove(r.path + ".grow")
		return fmt.Errorf("history: copying %s into a file of %d origins and %d rounds: %w", r.path, nl.capacity, nl.rounds, err)
	}
	r.f.Close()
	copy(n.keys, r.keys)
	n.rebuildFree()
	r.f, r.l, r.keys, r.free, r.buf, r.writeAt, r.rt = n.f, n.l, n.keys, n.free, n.buf, n.f.WriteAt, rt
	return nil
}

// Capacity is how many origins the file holds.
func (r *Ring) Capacity() int { return r.l.capacity }

// Rounds is how many verdicts each origin keeps.
func (r *Ring) Rounds() int { return r.l.rounds }

// Path is the file's path.
func (r *Ring) Path() string { return r.path }

// Sync makes the file hold exactly the origins of keys: each keeps its
// slot, a new one gets a free slot (-1 when the file is full), and the
// slots of origins not in keys are emptied. It returns each key's slot.
func (r *Ring) Sync(keys []uint64) ([]int32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil, errClosed
	}
	want := make(map[uint64]int32, len(keys))
	for _, k := range keys {
		want[k] = -1
	}
	var freed []int32
	for s, k := range r.keys {
		if k == 0 {
			continue
		}
		if _, ok := want[k]; ok {
			want[k] = int32(s)
		} else {
			freed = append(freed, int32(s))
		}
	}
	// Empty the records first, then the index: a crash between leaves an
	// index entry over an empty record, which is sound.
	zero := make([]byte, r.l.recordSize)
	for _, s := range freed {
		if _, err := r.writeAt(zero, r.l.recordAt(int(s))); err != nil {
			return nil, fmt.Errorf("history: emptying a slot: %w", err)
		}
		r.keys[s] = 0
	}
	r.rebuildFree()
	out := make([]int32, len(keys))
	changed := len(freed) > 0
	for i, k := range keys {
		s := want[k]
		if s < 0 && len(r.free) > 0 {
			s, r.free = r.free[0], r.free[1:]
			r.keys[s] = k
			want[k] = s
			changed = true
		}
		out[i] = s
	}
	if changed {
		ib := make([]byte, len(r.keys)*8)
		for i, k := range r.keys {
			binary.LittleEndian.PutUint64(ib[8*i:], k)
		}
		if _, err := r.writeAt(ib, r.l.indexAt()); err != nil {
			return out, fmt.Errorf("history: writing the index: %w", err)
		}
	}
	return out, nil
}

// Record appends one round's outcomes. It sorts obs by slot. reset counts
// the records that were damaged and started again empty. An error leaves
// the rest of the round unwritten; the next round writes again.
func (r *Ring) Record(at time.Time, obs []Obs) (reset int, err error) {
	slices.SortFunc(obs, func(a, b Obs) int { return int(a.Slot) - int(b.Slot) })
	i := 0
	for i < len(obs) && obs[i].Slot < 0 {
		i++
	}
	if err := r.groupNumbers(obs[i:]); err != nil {
		return 0, err
	}
	round, err := r.addRound(at)
	if err != nil {
		return 0, err
	}
	unix := at.Unix()
	for i < len(obs) {
		start := obs[i].Slot
		j := i + 1
		for j < len(obs) && obs[j].Slot-start < chunkSlots && obs[j].Slot-obs[j-1].Slot <= gapSlots {
			j++
		}
		n, err := r.recordChunk(unix, round, start, obs[i:j])
		reset += n
		if err != nil {
			return reset, err
		}
		i = j
	}
	return reset, nil
}

// addRound puts the round's time in the round table: its entry first,
// then the table's head, so that a reader never counts an entry not
// written. A write that fails leaves the table in memory as it was. It
// returns the round's number (that of the round before when the time is
// the same).
func (r *Ring) addRound(at time.Time) (uint32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return 0, errClosed
	}
	entry, off, head, undo, ok := r.rt.add(at.UnixMilli())
	if !ok {
		return uint32(r.rt.total - 1), nil
	}
	base := r.l.roundTableAt()
	if _, err := r.writeAt(entry, base+int64(off)); err != nil {
		undo()
		return 0, fmt.Errorf("history: writing the round table: %w", err)
	}
	if _, err := r.writeAt(head, base); err != nil {
		undo()
		return 0, fmt.Errorf("history: writing the round table: %w", err)
	}
	return uint32(r.rt.total - 1), nil
}

// groupNumbers sets the group numbers of obs, adding the names the table
// does not keep yet (a name it has no room for is left out, and its round
// says some were cut).
func (r *Ring) groupNumbers(obs []Obs) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return errClosed
	}
	for i := range obs {
		o := &obs[i]
		o.groupIDs = [GroupSlots]uint16{}
		if !o.Partition || r.l.groupSlots == 0 {
			continue
		}
		k := 0
		for _, name := range o.DownGroups[:min(int(o.NDown), GroupSlots)] {
			id, ok := r.groups.lookup(name)
			if !ok {
				raw, head, room := r.groups.prepare(name)
				if !room {
					o.GroupsCut = true
					continue
				}
				at := int64(headerSize + groupTableHead + len(r.groups.raw))
				if _, err := r.writeAt(raw[len(r.groups.raw):], at); err != nil {
					return fmt.Errorf("history: writing the group table: %w", err)
				}
				if _, err := r.writeAt(head, headerSize); err != nil {
					return fmt.Errorf("history: writing the group table: %w", err)
				}
				id = r.groups.commit(name, raw)
			}
			o.groupIDs[k] = id + 1
			k++
		}
		if int(o.NDown) > GroupSlots {
			o.GroupsCut = true
		}
	}
	return nil
}

// recordChunk writes the outcomes of neighbouring slots from start, of
// the round numbered round at unix, with one read and one write.
func (r *Ring) recordChunk(unix int64, round uint32, start int32, obs []Obs) (reset int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return 0, errClosed
	}
	if int(obs[len(obs)-1].Slot) >= r.l.capacity {
		return 0, fmt.Errorf("history: slot %d is past the file's %d", obs[len(obs)-1].Slot, r.l.capacity)
	}
	rs := r.l.recordSize
	n := int(obs[len(obs)-1].Slot-start) + 1
	b := r.buf[:n*rs]
	off := r.l.recordAt(int(start))
	if _, err := r.f.ReadAt(b, off); err != nil {
		return 0, fmt.Errorf("history: reading: %w", err)
	}
	for _, o := range obs {
		rec := b[int(o.Slot-start)*rs:][:rs]
		key := r.keys[o.Slot]
		if key == 0 {
			continue // freed since the slot was handed out
		}
		if got := binary.LittleEndian.Uint64(rec); got != key || !recordOK(rec) {
			if got != 0 || !recordOK(rec) {
				reset++
			}
			clear(rec)
			binary.LittleEndian.PutUint64(rec, key)
		}
		r.l.applyRun(rec, unix, round, o)
		sealRecord(rec)
	}
	if _, err := r.writeAt(b, off); err != nil {
		return reset, fmt.Errorf("history: writing: %w", err)
	}
	return reset, nil
}

// apply adds one round to a record; ms is the milliseconds of its time
// (kept from version 4).
func (l layout) apply(rec []byte, unix int64, ms uint16, o Obs) {
	le := binary.LittleEndian
	head, count := int(le.Uint16(rec[12:])), int(le.Uint16(rec[14:]))
	if head >= l.rounds {
		head = 0
	}
	e := rec[recordHead+head*l.entrySize:][:l.entrySize]
	clear(e)
	le.PutUint32(e, uint32(max(unix, 0)))
	le.PutUint16(e[4:], latencyUnits(o.Latency))
	if l.millis {
		le.PutUint16(e[l.millisAt():], min(ms, 999))
	}
	by := int(o.By) + 1
	if by < 0 || by > 63 {
		by = 0
	}
	e[6] = byte(o.Verdict&3) | byte(by)<<2
	e[7] = byte(o.State & 3)
	if o.Partition && l.groupSlots > 0 {
		e[7] |= statePartition
		if o.GroupsCut {
			e[7] |= stateGroupsCut
		}
		at := entryBase + l.voteSlots*voteSlotSize
		for k := 0; k < l.groupSlots && k < len(o.groupIDs); k++ {
			le.PutUint16(e[at+k*groupSlotSize:], o.groupIDs[k])
		}
	}
	for k := 0; k < int(o.NVotes) && k < l.voteSlots && k < len(o.Votes); k++ {
		v := o.Votes[k]
		if v.Source < 0 || int(v.Source) >= 254 {
			continue
		}
		slot := e[entryBase+k*voteSlotSize:][:voteSlotSize]
		slot[0], slot[1], slot[2], slot[3] = byte(v.Source)+1, v.Up, v.Down, v.Abstain
	}
	le.PutUint16(rec[12:], uint16((head+1)%l.rounds))
	le.PutUint16(rec[14:], uint16(min(count+1, l.rounds)))
	for t := range Tiers {
		l.bump(rec, t, unix, o.Verdict)
	}
}

// latencyUnits is d in units of 100 us, saturating.
func latencyUnits(d time.Duration) uint16 {
	u := d / (100 * time.Microsecond)
	switch {
	case u < 0:
		return 0
	case u > 0xffff:
		return 0xffff
	}
	return uint16(u)
}

// bump counts a verdict in tier t's bucket of unix, first emptying the
// buckets that time left behind.
func (l layout) bump(rec []byte, t int, unix int64, v Verdict) {
	le := binary.LittleEndian
	span := int64(Tiers[t].Span / time.Second)
	c := uint32(Tiers[t].Count)
	b := uint32(max(unix, 0) / span)
	top := le.Uint32(rec[16+4*t:])
	buckets := rec[l.tierOff[t]:][:int(c)*bucketSize]
	switch {
	case top == 0 || b >= top+c:
		clear(buckets)
		top = b
	case b > top:
		for n := top + 1; n <= b; n++ {
			clear(buckets[(n%c)*bucketSize:][:bucketSize])
		}
		top = b
	case b+c <= top:
		return // older than the tier keeps
	}
	le.PutUint32(rec[16+4*t:], top)
	at := buckets[(b%c)*bucketSize:]
	switch v {
	case Up:
		if n := le.Uint16(at); n < 0xffff {
			le.PutUint16(at, n+1)
		}
	case Down:
		if n := le.Uint16(at[2:]); n < 0xffff {
			le.PutUint16(at[2:], n+1)
		}
	}
}

// windows sums each tier's buckets that fall in its window ending at
// now: the current bucket and the Count-1 before it.
func (l layout) windows(rec []byte, now int64) [3]Window {
	le := binary.LittleEndian
	var out [3]Window
	for t, tier := range Tiers {
		span := int64(tier.Span / time.Second)
		c := int64(tier.Count)
		top := int64(le.Uint32(rec[16+4*t:]))
		if top == 0 {
			continue
		}
		nb := max(now, 0) / span
		from := max(nb-c+1, top-c+1, 1)
		to := min(nb, top)
		buckets := rec[l.tierOff[t]:]
		for n := from; n <= to; n++ {
			at := buckets[(n%c)*bucketSize:]
			out[t].Up += int(le.Uint16(at))
			out[t].Down += int(le.Uint16(at[2:]))
		}
	}
	return out
}

// since is when an origin's data begins (Origin.Since): points are its
// decoded rounds, count the rounds its ring holds.
func (l layout) since(rec []byte, now int64, first time.Time, whole bool) time.Time {
	if whole && !first.IsZero() {
		return first
	}
	le := binary.LittleEndian
	for t, tier := range Tiers {
		span := int64(tier.Span / time.Second)
		c := int64(tier.Count)
		top := int64(le.Uint32(rec[16+4*t:]))
		if top == 0 {
			continue
		}
		nb := max(now, 0) / span
		from := max(nb-c+1, top-c+1, 1)
		buckets := rec[l.tierOff[t]:]
		for n := from; n <= min(nb, top); n++ {
			at := buckets[(n%c)*bucketSize:]
			if le.Uint16(at) == 0 && le.Uint16(at[2:]) == 0 {
				continue
			}
			if n > nb-c+1 || t == len(Tiers)-1 {
				return time.Unix(n*span, 0).UTC()
			}
			break // this tier is full back to its window's start: ask a coarser one
		}
	}
	if !first.IsZero() {
		return first
	}
	return time.Time{}
}

// decode reads a sound record; names are the file's group names, rt its
// round table (version 5).
func (l layout) decode(rec []byte, now int64, names []string, rt *roundTimes) Origin {
	if l.runs {
		return l.decodeRuns(rec, now, names, rt, 0)
	}
	le := binary.LittleEndian
	head, count := int(le.Uint16(rec[12:])), int(le.Uint16(rec[14:]))
	count = min(count, l.rounds)
	head = min(head, l.rounds-1)
	o := Origin{Points: make([]Point, 0, count), Windows: l.windows(rec, now)}
	for k := range count {
		i := (head - count + k + 2*l.rounds) % l.rounds
		e := rec[recordHead+i*l.entrySize:]
		v := Verdict(e[6] & 3)
		if v == 0 {
			continue
		}
		var ms int64
		if l.millis {
			ms = int64(min(le.Uint16(e[l.millisAt():]), 999))
		}
		p := Point{
			Time:    time.Unix(int64(le.Uint32(e)), ms*int64(time.Millisecond)).UTC(),
			Verdict: v,
			By:      int8(e[6]>>2) - 1,
			State:   State(e[7] & 3),
			Latency: time.Duration(le.Uint16(e[4:])) * 100 * time.Microsecond,
		}
		if l.voteSlots > 0 {
			p.Votes = []Tally{}
			for k := range l.voteSlots {
				slot := e[entryBase+k*voteSlotSize:]
				if slot[0] == 0 {
					break
				}
				p.Votes = append(p.Votes, Tally{Source: int8(slot[0] - 1), Up: slot[1], Down: slot[2], Abstain: slot[3]})
			}
		}
		if l.groupSlots > 0 && e[7]&statePartition != 0 {
			p.Partition, p.GroupsCut = true, e[7]&stateGroupsCut != 0
			p.DownGroups = []string{}
			at := entryBase + l.voteSlots*voteSlotSize
			for k := range l.groupSlots {
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
		o.Points = append(o.Points, p)
	}
	if len(o.Points) > 0 {
		o.Kept, o.KeptSince = len(o.Points), o.Points[0].Time
	}
	o.Since = l.since(rec, now, o.KeptSince, count < l.rounds)
	return o
}

// Read returns what the file holds of the origin of key in slot. ok is
// false when the slot holds nothing of it yet; damaged is set when its
// record failed its checksum (it starts again empty at the next write).
func (r *Ring) Read(slot int32, key uint64, now time.Time) (o Origin, ok, damaged bool, err error) {
	return r.read(slot, key, now, 0)
}

// ReadLast is Read with only the last n points expanded (Kept and
// KeptSince still say what the file keeps): what the API shows.
func (r *Ring) ReadLast(slot int32, key uint64, now time.Time, n int) (o Origin, ok, damaged bool, err error) {
	return r.read(slot, key, now, max(n, 1))
}

// read is Read (last 0: every point) and ReadLast.
func (r *Ring) read(slot int32, key uint64, now time.Time, last int) (o Origin, ok, damaged bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return o, false, false, errClosed
	}
	if slot < 0 || int(slot) >= r.l.capacity || r.keys[slot] != key {
		return o, false, false, nil
	}
	rec := r.buf[:r.l.recordSize]
	if _, err := r.f.ReadAt(rec, r.l.recordAt(int(slot))); err != nil {
		return o, false, false, fmt.Errorf("history: reading: %w", err)
	}
	if !recordOK(rec) {
		return o, false, true, nil
	}
	if binary.LittleEndian.Uint64(rec) != key {
		return o, false, false, nil
	}
	if last == 0 {
		return r.l.decode(rec, now.Unix(), r.groups.names, &r.rt), true, false, nil
	}
	return r.l.decodeRuns(rec, now.Unix(), r.groups.names, &r.rt, last), true, false, nil
}

// Close closes the file.
func (r *Ring) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
