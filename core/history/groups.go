package history

import (
	"encoding/binary"
	"hash/crc32"
)

// groupTable is the names of the voter groups a file of version 3 keeps,
// numbered in the order they were first kept (from 0; an entry's group
// slot holds the number + 1). The table only grows: a file keeps every
// name it was ever given until it starts again empty.
type groupTable struct {
	ids   map[string]uint16
	names []string
	raw   []byte // the names as the file keeps them, after the head
	size  int    // the table's size in the file
}

// decodeGroups reads the table region b (all of it). An all-zero head is
// an empty table (a new file). bad says what is wrong with a damaged one.
func decodeGroups(b []byte) (groupTable, string) {
	g := groupTable{ids: map[string]uint16{}, size: len(b)}
	if len(b) < groupTableHead {
		return g, ""
	}
	le := binary.LittleEndian
	head := b[:groupTableHead]
	zero := true
	for _, c := range head {
		if c != 0 {
			zero = false
			break
		}
	}
	if zero {
		return g, ""
	}
	if crc32.Checksum(head[:12], castagnoli) != le.Uint32(head[12:]) {
		return g, "its table of voter groups has a damaged head"
	}
	count, used := int(le.Uint32(head)), int(le.Uint32(head[4:]))
	if used > len(b)-groupTableHead || count > 0xffff {
		return g, "its table of voter groups is larger than its room"
	}
	names := b[groupTableHead:][:used]
	if crc32.Checksum(names, castagnoli) != le.Uint32(head[8:]) {
		return g, "its table of voter groups is damaged"
	}
	for off := 0; off < used; {
		n := int(names[off])
		if off+1+n > used {
			return g, "its table of voter groups is damaged"
		}
		name := string(names[off+1 : off+1+n])
		g.ids[name] = uint16(len(g.names))
		g.names = append(g.names, name)
		off += 1 + n
	}
	if len(g.names) != count {
		return g, "its table of voter groups is damaged"
	}
	g.raw = append([]byte(nil), names...)
	return g, ""
}

// lookup is name's number, if the table keeps it.
func (g *groupTable) lookup(name string) (uint16, bool) {
	id, ok := g.ids[name]
	return id, ok
}

// prepare makes what adding name writes: the names after the head with
// name appended (write raw[len(g.raw):] at groupTableHead+len(g.raw)),
// then the new head (at the table's start), in that order, so that a
// name written without its head is not in the table. ok is false when
// the table has no room for it (or the name is empty or too long): it is
// then not kept.
func (g *groupTable) prepare(name string) (raw, head []byte, ok bool) {
	n := len(name)
	if n == 0 || n > MaxGroupName || len(g.names) >= 0xfffe || groupTableHead+len(g.raw)+1+n > g.size {
		return nil, nil, false
	}
	raw = make([]byte, len(g.raw), len(g.raw)+1+n)
	copy(raw, g.raw)
	raw = append(raw, byte(n))
	raw = append(raw, name...)
	head = make([]byte, groupTableHead)
	le := binary.LittleEndian
	le.PutUint32(head, uint32(len(g.names)+1))
	le.PutUint32(head[4:], uint32(len(raw)))
	le.PutUint32(head[8:], crc32.Checksum(raw, castagnoli))
	le.PutUint32(head[12:], crc32.Checksum(head[:12], castagnoli))
	return raw, head, true
}

// commit keeps name, once what prepare made is written, and returns its
// number.
func (g *groupTable) commit(name string, raw []byte) uint16 {
	id := uint16(len(g.names))
	g.ids[name] = id
	g.names = append(g.names, name)
	g.raw = raw
	return id
}
