package history

import (
	"encoding/binary"
	"hash/crc32"
	"hash/fnv"
	"strconv"
	"time"
)

// The file's layout (all integers little-endian):
//
//	header   4096 bytes: magic, version, record size, capacity, rounds,
//	         vote slots, the three tiers, creation time, CRC-32C; from
//	         version 3 also group slots and the group table's size, with
//	         their own CRC-32C
//	groups   (version 3) the table of voter group names, 16 KiB
//	index    capacity x 8 bytes (one key per slot, 0 = free), padded to 4096
//	records  capacity x RecordSize
//
// From version 4 each round entry ends with the milliseconds of its time
// (u16, 0-999), after its vote and group slots: 2 bytes an origin a
// round, so that rounds less than a second apart keep their order and
// spacing.
//
// Version 5 keeps runs instead of round entries (runs.go): per origin
// RunSlots runs of identical rounds (first time, last time, round count,
// verdict, source, state, tallies, groups), the latencies of its last
// RecentRounds rounds, and the counters; and once for the file a ring of
// the times of its last Rounds rounds (the round table, after the group
// table), from which a run's rounds get back their exact times.
const (
	magic   = "VIGILHR\x00"
	version = 5
	// readVersion is the oldest version ReadSnapshot still reads (an
	// agent opening a file of another version starts it again empty).
	readVersion = 1
	headerSize  = 4096
	pageSize    = 4096
	// recordHead is the fixed part of a record: key u64, crc u32, head
	// u16, count u16, the newest bucket number of each tier (3 x u32),
	// 4 bytes reserved.
	recordHead = 32
	// entryBase is one round entry without vote and group slots: time
	// u32 (Unix seconds), latency u16 (units of 100 us, saturating),
	// verdict u8 (bits 0-1 the verdict, bits 2-7 the settling source + 1),
	// state u8 (bits 0-1 the origin's state after the round, bit 2 the
	// partition rule ran, bit 3 more down groups than group slots, 4-7
	// reserved).
	entryBase = 8
	// millisSize is the milliseconds that end a round entry (version 4).
	millisSize = 2
	// statePartition and stateGroupsCut are the flags of an entry's
	// eighth byte (version 3).
	statePartition = 1 << 2
	stateGroupsCut = 1 << 3
	// voteSlotSize is one per-source tally of a round entry: the source's
	// chain position + 1 (0: an empty slot), then its up, down and
	// abstain votes of the round (u8 each, saturating).
	voteSlotSize = 4
	// groupSlotSize is one down group of a round entry (version 3): its
	// number in the group table + 1 (u16; 0: an empty slot).
	groupSlotSize = 2
	bucketSize    = 4 // up u16, down u16
	// groupTableSize is the size of the group table (version 3): a head
	// of 16 bytes (names u32, bytes used u32, CRC-32C of the names,
	// CRC-32C of the head's first 12 bytes), then each name as its
	// length (u8) and its bytes, in the order they were first kept.
	groupTableSize = 4 * pageSize
	groupTableHead = 16
)

// Tier is one ring of up/down counters: Count buckets of Span each.
type Tier struct {
	Span  time.Duration
	Count int
}

// Tiers are the counters every record keeps, finest first: they give the
// 1 h, 24 h and 7 d uptimes.
var Tiers = [3]Tier{{10 * time.Minute, 6}, {time.Hour, 24}, {6 * time.Hour, 28}}

// VoteSlots is how many per-source tallies each round entry of this
// version keeps: the sources the round asked about the origin, in chain
// order; the votes of a fourth source asked are not kept.
const VoteSlots = 3

// GroupSlots is how many down groups each round entry of this version
// keeps (the groups of the path-partition rule whose every vote was down
// in a round with an up vote, docs/partition.md); a round with more keeps
// the first GroupSlots and says some were cut.
const GroupSlots = 2

// MaxGroupName is the longest group name the group table keeps; a longer
// one is left out, as if cut.
const MaxGroupName = 255

// DefaultRounds is how many rounds the file keeps: 24 hours of rounds at
// the default round_interval of 30 s.
const DefaultRounds = 2880

// MaxRounds bounds Options.Rounds (the round table then takes 8 MiB).
const MaxRounds = 1 << 20

// maxRoundsOld bounds the rounds of a file before version 5.
const maxRoundsOld = 1024

// layout is the geometry of one file.
type layout struct {
	rounds, voteSlots int
	// groupSlots and groupTable are 0 before version 3.
	groupSlots, groupTable int
	// millis says the entries end with their milliseconds (version 4).
	millis     bool
	capacity   int
	recordSize int
	entrySize  int
	tierOff    [3]int // offset of each tier's buckets in a record
	// runs says the records keep runs (version 5): runSlots of them, then
	// recent latencies; roundTable is the size of the round table.
	runs              bool
	runSlots, recent  int
	latAt, roundTable int
}

// newLayout is the layout of this version's files: rounds is how many
// rounds the round table keeps.
func newLayout(rounds, capacity int) layout {
	l := layout{rounds: rounds, voteSlots: VoteSlots, groupSlots: GroupSlots, groupTable: groupTableSize, capacity: capacity, millis: true,
		runs: true, runSlots: RunSlots, recent: RecentRounds}
	l.entrySize = runSize
	l.latAt = recordHead + RunSlots*runSize
	off := l.latAt + RecentRounds*latencySize
	for i, t := range Tiers {
		l.tierOff[i] = off
		off += t.Count * bucketSize
	}
	l.recordSize = (off + 7) &^ 7
	l.roundTable = (roundTableHead + rounds*8 + pageSize - 1) / pageSize * pageSize
	return l
}

// makeLayout is the layout of a file before version 4 (no milliseconds).
func makeLayout(rounds, voteSlots, groupSlots, groupTable, capacity int) layout {
	return buildLayout(rounds, voteSlots, groupSlots, groupTable, capacity, false)
}

func buildLayout(rounds, voteSlots, groupSlots, groupTable, capacity int, millis bool) layout {
	l := layout{rounds: rounds, voteSlots: voteSlots, groupSlots: groupSlots, groupTable: groupTable, capacity: capacity, millis: millis}
	l.entrySize = entryBase + voteSlots*voteSlotSize + groupSlots*groupSlotSize
	if millis {
		l.entrySize += millisSize
	}
	off := recordHead + rounds*l.entrySize
	for i, t := range Tiers {
		l.tierOff[i] = off
		off += t.Count * bucketSize
	}
	l.recordSize = (off + 7) &^ 7
	return l
}

// RecordSize is the bytes one origin takes in the file (its index key not
// counted: add 8); the same for every rounds from version 5.
func RecordSize(rounds int) int { return newLayout(rounds, 0).recordSize }

// FileSize is the size of a file of capacity slots keeping rounds
// rounds.
func FileSize(rounds, capacity int) int64 { return newLayout(rounds, capacity).fileSize() }

// RecordsAt is the offset of the first record in a file of capacity
// slots (for tests that damage one).
func RecordsAt(capacity int) int64 { return newLayout(DefaultRounds, capacity).recordsAt() }

func (l layout) indexSize() int { return (l.capacity*8 + pageSize - 1) / pageSize * pageSize }

func (l layout) indexAt() int64 { return int64(headerSize + l.groupTable + l.roundTable) }

// roundTableAt is the offset of the round table (version 5).
func (l layout) roundTableAt() int64 { return int64(headerSize + l.groupTable) }

func (l layout) recordsAt() int64 { return l.indexAt() + int64(l.indexSize()) }

func (l layout) recordAt(slot int) int64 { return l.recordsAt() + int64(slot)*int64(l.recordSize) }

func (l layout) fileSize() int64 { return l.recordAt(l.capacity) }

// millisAt is the offset of the milliseconds in an entry (version 4).
func (l layout) millisAt() int { return l.entrySize - millisSize }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (l layout) encodeHeader(created time.Time) []byte {
	b := make([]byte, headerSize)
	copy(b, magic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], version)
	le.PutUint32(b[12:], uint32(l.recordSize))
	le.PutUint32(b[16:], uint32(l.capacity))
	if l.runs {
		le.PutUint16(b[20:], uint16(l.runSlots))
	} else {
		le.PutUint16(b[20:], uint16(l.rounds)) // a test's file of an older version
	}
	le.PutUint16(b[22:], uint16(l.voteSlots))
	for i, t := range Tiers {
		le.PutUint32(b[24+8*i:], uint32(t.Span/time.Second))
		le.PutUint16(b[28+8*i:], uint16(t.Count))
	}
	le.PutUint64(b[48:], uint64(created.Unix()))
	le.PutUint32(b[56:], crc32.Checksum(b[:56], castagnoli))
	le.PutUint16(b[60:], uint16(l.groupSlots))
	le.PutUint32(b[64:], uint32(l.groupTable))
	le.PutUint32(b[68:], crc32.Checksum(b[60:68], castagnoli))
	if l.runs {
		le.PutUint32(b[72:], uint32(l.rounds))
		le.PutUint16(b[76:], uint16(l.recent))
		le.PutUint16(b[78:], uint16(l.entrySize))
		le.PutUint32(b[80:], crc32.Checksum(b[72:80], castagnoli))
	}
	return b
}

// headerInfo is what a header says.
type headerInfo struct {
	layout
	version int
	created time.Time
}

// decodeHeader reads a header, or says what is wrong with it. old accepts
// the older versions a reader still understands (readVersion and later).
func decodeHeader(b []byte, old bool) (headerInfo, string) {
	var h headerInfo
	if len(b) < headerSize {
		return h, "the header is cut short"
	}
	if string(b[:8]) != magic {
		return h, "it is not a vigil history file (bad magic)"
	}
	le := binary.LittleEndian
	if crc32.Checksum(b[:56], castagnoli) != le.Uint32(b[56:]) {
		return h, "the header's checksum does not match"
	}
	if v := le.Uint32(b[8:]); v != version && !(old && v >= readVersion && v < version) {
		return h, "it has format version " + strconv.Itoa(int(v)) + ", this agent writes " + strconv.Itoa(version)
	}
	h.version = int(le.Uint32(b[8:]))
	rounds, slots, capacity := int(le.Uint16(b[20:])), int(le.Uint16(b[22:])), int(le.Uint32(b[16:]))
	if h.version >= 5 {
		if crc32.Checksum(b[72:80], castagnoli) != le.Uint32(b[80:]) {
			return h, "the header's checksum of its round fields does not match"
		}
		// Bytes 20-21 hold the runs an origin, which this version fixes.
		if rounds != RunSlots || int(le.Uint16(b[76:])) != RecentRounds || int(le.Uint16(b[78:])) != runSize || slots != VoteSlots {
			return h, "its records are not this version's (runs, recent latencies or vote slots)"
		}
		rounds = int(le.Uint32(b[72:]))
		if rounds < 1 || rounds > MaxRounds || capacity < 1 {
			return h, "the header's sizes are out of range"
		}
	} else if rounds < 1 || rounds > maxRoundsOld || capacity < 1 || slots > 63 {
		return h, "the header's sizes are out of range"
	}
	groupSlots, groupTable := 0, 0
	if h.version >= 3 {
		if crc32.Checksum(b[60:68], castagnoli) != le.Uint32(b[68:]) {
			return h, "the header's checksum of its group fields does not match"
		}
		groupSlots, groupTable = int(le.Uint16(b[60:])), int(le.Uint32(b[64:]))
		if groupSlots > 63 || groupTable%pageSize != 0 || groupTable > 1<<24 || (groupSlots > 0) != (groupTable > 0) {
			return h, "the header's group sizes are out of range"
		}
	}
	for i, t := range Tiers {
		if time.Duration(le.Uint32(b[24+8*i:]))*time.Second != t.Span || int(le.Uint16(b[28+8*i:])) != t.Count {
			return h, "its uptime counters are not this version's"
		}
	}
	if h.version >= 5 {
		if groupSlots != GroupSlots {
			return h, "its records are not this version's (group slots)"
		}
		h.layout = newLayout(rounds, capacity)
		h.groupTable = groupTable
	} else {
		h.layout = buildLayout(rounds, slots, groupSlots, groupTable, capacity, h.version >= 4)
	}
	if int(le.Uint32(b[12:])) != h.recordSize {
		return h, "the header's record size does not match its rounds"
	}
	h.created = time.Unix(int64(le.Uint64(b[48:])), 0).UTC()
	return h, ""
}

// Key is the slot key of one origin: a 64-bit FNV-1a hash of the site and
// origin names (never 0, which marks a free slot).
func Key(site, origin string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(site))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(origin))
	k := h.Sum64()
	if k == 0 {
		k = 1
	}
	return k
}

// recordSum is a record's CRC-32C, its crc field left out.
func recordSum(rec []byte) uint32 {
	c := crc32.Update(0, castagnoli, rec[:8])
	return crc32.Update(c, castagnoli, rec[12:])
}

func sealRecord(rec []byte) { binary.LittleEndian.PutUint32(rec[8:], recordSum(rec)) }

// recordOK reports whether rec is sound: all zero (never written), or
// its checksum matches.
func recordOK(rec []byte) bool {
	if binary.LittleEndian.Uint32(rec[8:]) == recordSum(rec) {
		return true
	}
	for _, c := range rec {
		if c != 0 {
			return false
		}
	}
	return true
}
