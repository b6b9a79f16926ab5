package history

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"
)

// Snapshot is what a history file holds, read without opening it for
// writing (a running agent may keep writing it meanwhile: a record caught
// in the middle of a write fails its checksum and is left out, counted in
// Damaged).
type Snapshot struct {
	Rounds, VoteSlots int
	// GroupSlots is how many down groups of the path-partition rule each
	// round keeps (0 before version 3, which kept none).
	GroupSlots int
	// Version is the file's format version (1 kept no votes, 2 no voter
	// groups).
	Version int
	Created time.Time
	// Origins holds each kept origin's record by its Key.
	Origins map[uint64]Origin
	Damaged int
}

// ReadSnapshot reads the history file at path.
func ReadSnapshot(path string) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	hb := make([]byte, headerSize)
	if _, err := io.ReadFull(f, hb); err != nil {
		return nil, fmt.Errorf("history: %s: the header is cut short: %w", path, err)
	}
	h, bad := decodeHeader(hb, true)
	if bad != "" {
		return nil, fmt.Errorf("history: %s: %s", path, bad)
	}
	var names []string
	if h.groupTable > 0 {
		// A running agent may be adding a name: read again a table
		// caught between its name and its head.
		tb := make([]byte, h.groupTable)
		var bad string
		for try := 0; try < 3; try++ {
			if _, err := f.ReadAt(tb, headerSize); err != nil {
				return nil, fmt.Errorf("history: %s: reading the group table: %w", path, err)
			}
			var groups groupTable
			if groups, bad = decodeGroups(tb); bad == "" {
				names = groups.names
				break
			}
		}
		if bad != "" {
			return nil, fmt.Errorf("history: %s: %s", path, bad)
		}
	}
	var rt *roundTimes
	if h.runs {
		// A running agent may be adding a round: read the head again
		// after the table, and read again a table whose head changed
		// meanwhile or that does not decode (the last try takes a table
		// that decodes: its rounds newer than its head are let go).
		rb := make([]byte, h.roundTable)
		again := make([]byte, roundTableHead)
		var bad string
		for try := 0; try < 5; try++ {
			if _, err := f.ReadAt(rb, h.roundTableAt()); err != nil {
				return nil, fmt.Errorf("history: %s: reading the round table: %w", path, err)
			}
			if _, err := f.ReadAt(again, h.roundTableAt()); err != nil {
				return nil, fmt.Errorf("history: %s: reading the round table: %w", path, err)
			}
			if !bytes.Equal(rb[:roundTableHead], again) && try < 4 {
				bad = "its round table changed while it was read"
				continue
			}
			var t roundTimes
			if t, bad = decodeRoundTimes(rb, h.rounds); bad == "" {
				rt = &t
				break
			}
		}
		if bad != "" {
			return nil, fmt.Errorf("history: %s: %s", path, bad)
		}
	}
	ib := make([]byte, h.capacity*8)
	if _, err := f.ReadAt(ib, h.indexAt()); err != nil {
		return nil, fmt.Errorf("history: %s: reading the index: %w", path, err)
	}
	s := &Snapshot{Rounds: h.rounds, VoteSlots: h.voteSlots, GroupSlots: h.groupSlots, Version: h.version, Created: h.created, Origins: map[uint64]Origin{}}
	rec := make([]byte, h.recordSize)
	now := time.Now().Unix()
	for slot := 0; slot < h.capacity; slot++ {
		key := binary.LittleEndian.Uint64(ib[8*slot:])
		if key == 0 {
			continue
		}
		// A running agent may be writing the record: a read that caught
		// it half-written fails its checksum, and a read again gets it
		// whole. A record that stays bad is damage.
		ok := false
		for try := 0; try < 3 && !ok; try++ {
			if _, err := f.ReadAt(rec, h.recordAt(slot)); err != nil {
				return nil, fmt.Errorf("history: %s: reading slot %d: %w", path, slot, err)
			}
			ok = recordOK(rec)
		}
		if !ok {
			s.Damaged++
			continue
		}
		if binary.LittleEndian.Uint64(rec) != key {
			continue // never written since the slot was handed out
		}
		s.Origins[key] = h.decode(rec, now, names, rt)
	}
	return s, nil
}
