package probe

import (
	"bytes"
	"io"
	"sync"
)

// bodyBufSize is the size of the pooled buffer a body is read into. Every
// probe reads its body through one such buffer and keeps nothing of it.
const bodyBufSize = 32 << 10

var bodyBufs = sync.Pool{New: func() any {
	b := make([]byte, bodyBufSize)
	return &b
}}

// readBody reads body to its end, or until limit bytes have been read,
// discarding what it reads, and reports how many bytes it read and whether
// want appeared in them (always true when want is empty). It keeps reading
// after a match: the probe judges the whole body, so one that stalls after
// the expected text still fails. A match may straddle any number of reads.
func readBody(body io.Reader, want string, limit int64) (n int64, found bool, err error) {
	bp := bodyBufs.Get().(*[]byte)
	defer bodyBufs.Put(bp)
	buf := *bp
	// Between reads the buffer starts with the last len(want)-1 bytes seen,
	// so that a match across the boundary is found.
	keep := max(len(want)-1, 0)
	if keep > len(buf)/2 {
		buf = make([]byte, keep+bodyBufSize) // a long expected text: rare
	}
	needle := []byte(want)
	found = len(needle) == 0
	carry := 0
	for n < limit {
		room := buf[carry:]
		if left := limit - n; int64(len(room)) > left {
			room = room[:left]
		}
		m, err := body.Read(room)
		if m > 0 {
			n += int64(m)
			if !found {
				seen := buf[:carry+m]
				if bytes.Contains(seen, needle) {
					found, carry = true, 0
				} else {
					carry = copy(buf, seen[len(seen)-min(keep, len(seen)):])
				}
			}
		}
		if err == io.EOF {
			return n, found, nil
		}
		if err != nil {
			return n, found, err
		}
	}
	return n, found, nil
}
