package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/bits"
	"os"
)

// This file checks a bbolt file's structure with ordinary reads (pread),
// never through a memory map, so that a truncated or scribbled file gives
// an error instead of a fault. It follows bbolt v1.5.0's on-disk format
// (go.etcd.io/bbolt/internal/common) and the rules of its own tx.Check:
// both header (meta) pages, the high-water mark against the file size, the
// freelist, every page of every bucket's tree (type, identity, bounds of
// every element, key order, single reference) and that every page below
// the high-water mark is either in use or free. Once a file passes, bbolt
// can map it and walk it without touching memory outside the file.

// Layout of bbolt's format (native byte order, as bbolt writes it).
const (
	pageHeaderSize   = 16 // id u64, flags u16, count u16, overflow u32
	elementSize      = 16 // branch: pos, ksize u32, pgid u64; leaf: flags, pos, ksize, vsize u32
	bucketHeaderSize = 16 // root pgid u64, sequence u64
	metaSize         = 64 // magic, version, pageSize, flags u32; root, seq, freelist, pgid, txid, checksum u64

	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagMeta     = 0x04
	flagFreelist = 0x10
	flagBucket   = 0x01 // leaf element: the value is a bucket

	boltMagic     = 0xED0CDAED
	boltVersion   = 2
	noFreelist    = ^uint64(0)
	maxTreeDepth  = 256
	minPageSize   = 1024
	maxPageSize   = 1 << 24
	freelistCount = 0xFFFF // page.count value saying the real count is the first element
)

var ne = binary.NativeEndian

// errEmptyFile: a 0-byte file, never a valid state.
var errEmptyFile = errors.New("it is empty (0 bytes)")

// damage is a structural problem found in a file: the file, not the
// system, is at fault.
type damage struct{ problem string }

func (d *damage) Error() string { return d.problem }

func damagef(format string, args ...any) error {
	return &damage{problem: fmt.Sprintf(format, args...)}
}

// meta is a decoded header page.
type meta struct {
	magic, version, pageSize, flags uint32
	root, rootSeq, freelist, pgid   uint64
	txid, checksum                  uint64
	problem                         string // why it is invalid, "" when valid
}

func parseMeta(b []byte) meta {
	if len(b) < pageHeaderSize+metaSize {
		return meta{problem: "cut short"}
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	x := meta{
		magic: ne.Uint32(m[0:]), version: ne.Uint32(m[4:]), pageSize: ne.Uint32(m[8:]), flags: ne.Uint32(m[12:]),
		root: ne.Uint64(m[16:]), rootSeq: ne.Uint64(m[24:]), freelist: ne.Uint64(m[32:]), pgid: ne.Uint64(m[40:]),
		txid: ne.Uint64(m[48:]), checksum: ne.Uint64(m[56:]),
	}
	h := fnv.New64a()
	h.Write(m[:56])
	switch {
	case x.magic != boltMagic:
		x.problem = "not a bbolt header"
	case x.version != boltVersion:
		x.problem = fmt.Sprintf("format version %d, not %d", x.version, boltVersion)
	case x.checksum != h.Sum64():
		x.problem = "checksum mismatch"
	}
	return x
}

// fileReport is what verifyFile found in a sound file.
type fileReport struct {
	size     int64
	pageSize int
	pages    uint64 // high-water mark: pages in use or free
	txid     uint64
	inUse    int // pages reachable from the root
	free     int
	// buckets counts the plain keys of each top-level bucket.
	buckets map[string]int
	// warnings are oddities bbolt copes with (one bad header page).
	warnings []string
}

// visitFunc sees every plain key of a top-level bucket while verifyFile
// walks; an error from it is reported as damage of that record.
type visitFunc func(bucket string, k, v []byte) error

// verifyFile checks the bbolt file at path. It returns a *damage for a
// structural problem, another error when the file cannot be read.
func verifyFile(path string, visit visitFunc) (*fileReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, damagef("it is a directory, not a file")
	}
	return verifyReader(f, st.Size(), visit)
}

func verifyReader(r io.ReaderAt, size int64, visit visitFunc) (*fileReport, error) {
	if size == 0 {
		return nil, errEmptyFile
	}
	v := &verifier{r: r, size: size, visit: visit, rep: &fileReport{size: size, buckets: map[string]int{}}}
	if err := v.run(); err != nil {
		return nil, err
	}
	return v.rep, nil
}

type verifier struct {
	r     io.ReaderAt
	size  int64
	ps    uint64
	hwm   uint64
	used  []uint64 // bitmap of pages reachable (in use)
	freed []uint64 // bitmap of pages on the freelist
	visit visitFunc
	rep   *fileReport
	pool  [][]byte // one page buffer per tree depth
}

// read reads exactly n bytes at off; a short file is damage.
func (v *verifier) read(buf []byte, off uint64) error {
	n, err := v.r.ReadAt(buf, int64(off))
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return damagef("it ends at %s, inside page %d: it was cut short", sizeString(v.size), off/max(v.ps, 1))
	}
	return err
}

func (v *verifier) run() error {
	head := make([]byte, 4096)
	n, err := v.r.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	head = head[:n]
	m0 := parseMeta(head)
	ps := uint64(0)
	if m0.problem == "" {
		ps = uint64(m0.pageSize)
	} else {
		// Like bbolt: look for the second header page at each possible
		// page size to learn the page size.
		for i := 0; i <= 14; i++ {
			pos := int64(1024) << i
			if pos >= v.size-1024 {
				break
			}
			buf := make([]byte, 4096)
			n, _ := v.r.ReadAt(buf, pos)
			if m := parseMeta(buf[:n]); m.problem == "" {
				ps = uint64(m.pageSize)
				break
			}
		}
	}
	if ps == 0 {
		if v.size < pageHeaderSize+metaSize {
			return damagef("it is only %s long, too short to hold a header page: it was cut short or is not a vigil state file", sizeString(v.size))
		}
		return damagef("neither header page is valid (page 0: %s): it is not a bbolt file or its start was overwritten", m0.problem)
	}
	if ps < minPageSize || ps > maxPageSize || ps&(ps-1) != 0 {
		return damagef("its header gives an impossible page size %d", ps)
	}
	v.ps = ps
	if uint64(v.size) < 2*ps {
		return damagef("it is %s, smaller than its two header pages (%s): it was cut short", sizeString(v.size), sizeString(int64(2*ps)))
	}
	metas := [2]meta{}
	for i := range metas {
		buf := make([]byte, pageHeaderSize+metaSize)
		if err := v.read(buf, uint64(i)*ps); err != nil {
			return err
		}
		metas[i] = parseMeta(buf)
	}
	if metas[0].problem != "" && metas[1].problem != "" {
		return damagef("both header pages are invalid (page 0: %s; page 1: %s)", metas[0].problem, metas[1].problem)
	}
	cur, other := 0, 1
	if metas[1].txid > metas[0].txid {
		cur, other = 1, 0
	}
	if metas[cur].problem != "" {
		cur, other = other, cur
	}
	if metas[other].problem != "" {
		v.rep.warnings = append(v.rep.warnings, fmt.Sprintf("header page %d is invalid (%s): the file is read as of header page %d (transaction %d), which may lack the last commit; the next commit rewrites it",
			other, metas[other].problem, cur, metas[cur].txid))
	}
	m := metas[cur]
	if uint64(m.pageSize) != ps {
		return damagef("its header pages disagree on the page size (%d and %d)", m.pageSize, ps)
	}
	v.hwm = m.pgid
	v.rep.pageSize, v.rep.pages, v.rep.txid = int(ps), m.pgid, m.txid
	hi, reach := bits.Mul64(m.pgid, ps)
	if hi != 0 || reach > uint64(v.size) {
		if hi != 0 || reach > 1<<50 {
			return damagef("it is %s but its header says its pages reach an impossible %d pages", sizeString(v.size), m.pgid)
		}
		return damagef("file is %s but its pages reach %s: it was cut short", sizeString(v.size), sizeString(int64(reach)))
	}
	if m.root < 2 || m.root >= v.hwm {
		return damagef("its root page %d is outside the file's %d pages", m.root, v.hwm)
	}
	words := (v.hwm + 63) / 64
	v.used, v.freed = make([]uint64, words), make([]uint64, words)
	v.mark(v.used, 0)
	v.mark(v.used, 1)
	if m.freelist != noFreelist {
		if err := v.readFreelist(m.freelist); err != nil {
			return err
		}
	}
	if _, err := v.tree(m.root, 0, nil, nil, "", true); err != nil {
		return err
	}
	for id := uint64(2); id < v.hwm; id++ {
		u, f := v.has(v.used, id), v.has(v.freed, id)
		switch {
		case u:
			v.rep.inUse++
		case f:
			v.rep.free++
		case m.freelist != noFreelist:
			return damagef("page %d is neither in use nor free: pages were lost", id)
		}
	}
	return nil
}

func (v *verifier) mark(bm []uint64, id uint64) { bm[id/64] |= 1 << (id % 64) }
func (v *verifier) has(bm []uint64, id uint64) bool {
	return bm[id/64]&(1<<(id%64)) != 0
}

// page reads page id (with its overflow pages) into the buffer of depth.
func (v *verifier) page(id uint64, depth int) ([]byte, error) {
	if id < 2 || id >= v.hwm {
		return nil, damagef("a reference to page %d, outside the file's %d pages", id, v.hwm)
	}
	for len(v.pool) <= depth {
		v.pool = append(v.pool, make([]byte, v.ps))
	}
	buf := v.pool[depth][:v.ps]
	if err := v.read(buf, id*v.ps); err != nil {
		return nil, err
	}
	if got := ne.Uint64(buf); got != id {
		return nil, damagef("page %d is blank or overwritten (it says it is page %d)", id, got)
	}
	over := uint64(ne.Uint32(buf[12:]))
	if over > 0 {
		if id+over >= v.hwm {
			return nil, damagef("page %d runs %d pages past the file's %d pages", id, id+over+1-v.hwm, v.hwm)
		}
		n := (over + 1) * v.ps
		if uint64(cap(v.pool[depth])) < n {
			v.pool[depth] = make([]byte, n)
		}
		big := v.pool[depth][:n]
		copy(big, buf)
		if err := v.read(big[v.ps:], (id+1)*v.ps); err != nil {
			return nil, err
		}
		buf = big
	}
	return buf, nil
}

// claim marks page id and its overflow in use, once.
func (v *verifier) claim(id uint64, buf []byte) error {
	over := uint64(ne.Uint32(buf[12:]))
	for i := id; i <= id+over; i++ {
		if v.has(v.used, i) {
			return damagef("page %d is referenced twice", i)
		}
		if v.has(v.freed, i) {
			return damagef("page %d is in use and also listed as free", i)
		}
		v.mark(v.used, i)
	}
	return nil
}

func (v *verifier) readFreelist(id uint64) error {
	buf, err := v.page(id, 0)
	if err != nil {
		return fmt.Errorf("the free page list: %w", err)
	}
	if flags := ne.Uint16(buf[8:]); flags != flagFreelist {
		return damagef("the free page list (page %d) is not a free list (flags %#x)", id, flags)
	}
	if err := v.claim(id, buf); err != nil {
		return err
	}
	idx, count := uint64(0), uint64(ne.Uint16(buf[10:]))
	if count == freelistCount {
		idx, count = 1, ne.Uint64(buf[pageHeaderSize:])
	}
	room := uint64(len(buf)-pageHeaderSize) / 8
	if idx+count > room || count > v.hwm {
		return damagef("the free page list (page %d) claims %d entries, more than it holds", id, count)
	}
	for i := idx; i < idx+count; i++ {
		fid := ne.Uint64(buf[pageHeaderSize+8*i:])
		if fid < 2 || fid >= v.hwm {
			return damagef("the free page list names page %d, outside the file's %d pages", fid, v.hwm)
		}
		if v.has(v.freed, fid) {
			return damagef("the free page list names page %d twice", fid)
		}
		if v.has(v.used, fid) {
			return damagef("page %d is in use and also listed as free", fid)
		}
		v.mark(v.freed, fid)
	}
	return nil
}

// element returns the key (and value of a leaf element) of element i of
// the page in buf, with bounds checked.
func element(buf []byte, i int, leaf bool) (flags uint32, k, val []byte, child uint64, err error) {
	off := pageHeaderSize + i*elementSize
	e := buf[off : off+elementSize]
	var pos, ksize, vsize uint64
	if leaf {
		flags, pos, ksize, vsize = ne.Uint32(e), uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
	} else {
		pos, ksize, child = uint64(ne.Uint32(e)), uint64(ne.Uint32(e[4:])), ne.Uint64(e[8:])
	}
	start := uint64(off) + pos
	end := start + ksize + vsize
	if pos < uint64(elementSize) || end > uint64(len(buf)) {
		return 0, nil, nil, 0, damagef("element %d points outside its page", i)
	}
	return flags, buf[start : start+ksize], buf[start+ksize : end], child, nil
}

// tree walks the b+tree rooted at page id whose keys lie in [lo, hi)
// (nil for no bound) and returns its largest key. bucket names the
// top-level bucket the tree belongs to ("" for the root), top says the
// tree is the root bucket's.
func (v *verifier) tree(id uint64, depth int, lo, hi []byte, bucket string, top bool) ([]byte, error) {
	if depth > maxTreeDepth {
		return nil, damagef("a tree deeper than %d pages (a loop)", maxTreeDepth)
	}
	buf, err := v.page(id, depth)
	if err != nil {
		return nil, err
	}
	if err := v.claim(id, buf); err != nil {
		return nil, err
	}
	flags := ne.Uint16(buf[8:])
	switch flags {
	case flagBranch, flagLeaf:
	default:
		return nil, damagef("page %d%s is not a tree page (flags %#x)", id, inBucket(bucket), flags)
	}
	last, err := v.nodes(buf, id, depth, lo, hi, bucket, top)
	if err != nil {
		return nil, err
	}
	return last, nil
}

func inBucket(bucket string) string {
	if bucket == "" {
		return ""
	}
	return fmt.Sprintf(" (bucket %q)", bucket)
}

// nodes checks the elements of a branch or leaf page held in buf (a real
// page, id > 0, or an inline bucket's page, id == 0).
func (v *verifier) nodes(buf []byte, id uint64, depth int, lo, hi []byte, bucket string, top bool) ([]byte, error) {
	where := fmt.Sprintf("page %d%s", id, inBucket(bucket))
	if id == 0 {
		where = fmt.Sprintf("an inline bucket%s", inBucket(bucket))
	}
	leaf := ne.Uint16(buf[8:]) == flagLeaf
	count := int(ne.Uint16(buf[10:]))
	if pageHeaderSize+count*elementSize > len(buf) {
		return nil, damagef("%s claims %d elements, more than it holds", where, count)
	}
	if !leaf && count == 0 {
		return nil, damagef("%s is an empty branch", where)
	}
	prev := lo
	var last []byte
	for i := range count {
		eflags, k, val, child, err := element(buf, i, leaf)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if (i == 0 && prev != nil && bytes.Compare(prev, k) > 0) || (i > 0 && bytes.Compare(prev, k) >= 0) {
			return nil, damagef("%s: keys out of order at element %d", where, i)
		}
		if hi != nil && bytes.Compare(k, hi) >= 0 {
			return nil, damagef("%s: key %d is beyond its parent's range", where, i)
		}
		if !leaf {
			var next []byte
			if i+1 < count {
				_, next, _, _, err = element(buf, i+1, false)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", where, err)
				}
			} else {
				next = hi
			}
			// The child's buffer is reused: copy what must outlive it.
			kc, nc := bytes.Clone(k), bytes.Clone(next)
			if next == nil {
				nc = nil
			}
			got, err := v.tree(child, depth+1, kc, nc, bucket, top)
			if err != nil {
				return nil, err
			}
			// buf may have been reused by a deeper level only if it was a
			// pool buffer of a deeper depth; it is ours (depth), so intact.
			prev, last = got, got
			continue
		}
		if eflags&flagBucket != 0 {
			name := bucket
			if top {
				name = string(k)
			}
			if err := v.bucket(val, depth, name, top); err != nil {
				return nil, err
			}
		} else if top {
			return nil, damagef("%s: the top level holds a plain key %q where only buckets belong", where, k)
		} else if v.visit != nil {
			if err := v.visit(bucket, k, val); err != nil {
				return nil, damagef("the record %q in bucket %q %v", k, bucket, err)
			}
		}
		if !top {
			if _, ok := v.rep.buckets[bucket]; ok && eflags&flagBucket == 0 {
				v.rep.buckets[bucket]++
			}
		}
		prev, last = k, k
	}
	return bytes.Clone(last), nil
}

// bucket checks a bucket value: a root page, or an inline page.
func (v *verifier) bucket(val []byte, depth int, name string, top bool) error {
	if len(val) < bucketHeaderSize {
		return damagef("the bucket %q has a cut-short header", name)
	}
	if top {
		if _, ok := v.rep.buckets[name]; !ok {
			v.rep.buckets[name] = 0
		}
	}
	root := ne.Uint64(val)
	if root != 0 {
		_, err := v.tree(root, depth+1, nil, nil, name, false)
		return err
	}
	in := val[bucketHeaderSize:]
	if len(in) < pageHeaderSize {
		return damagef("the inline bucket %q is cut short", name)
	}
	if flags := ne.Uint16(in[8:]); flags != flagLeaf {
		return damagef("the inline bucket %q is not a leaf (flags %#x)", name, flags)
	}
	_, err := v.nodes(in, 0, depth+1, nil, nil, name, false)
	return err
}

// sizeString prints a byte count for people.
func sizeString(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%d KB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}
