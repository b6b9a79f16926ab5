package dns

// The UDP fast path (issue 19). Profiled on loopback, the miekg server spent
// most of a query outside the answer itself: a goroutine per packet, the
// request unpacked into a dns.Msg, the answer built and packed again with a
// fresh compression map, all for answers that only change when a
// publication does. The fast path runs in the UDP read loop: it recognises a
// plain query (one question, no compression pointer, at most one OPT record
// without options), and answers it with the packed answer that the normal
// path produced for the same question bytes from the same table, with the
// query's ID and RD and CD bits patched in. Everything else, and the first
// query of each question for each table, goes through the normal path; so
// the bytes sent are the ones the normal path would send. The socket is
// read and written in batches (batch.go).
//
// A question whose answer meets a failback ramp (a site with a Ramp) is
// cached twice: the normal path's answer from the current level and its
// answer from the level being left. Every hit draws (0 to 99, per query)
// which one it sends, so the cache never freezes one draw: Weight per cent
// of the answers carry the current level's addresses, as on the normal
// path. An answer meeting two ramps (a CNAME between ramping sites) is not
// cached.

import (
	"hash/maphash"
	"math/rand/v2"
	"sync"

	"github.com/miekg/dns"
)

const (
	cacheShards = 16
	// cacheMax bounds the entries of one table's cache (random names
	// cannot grow it further; they go through the normal path).
	cacheMax = 1 << 16
)

type answerCache struct {
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string]*packedAnswer
	_  [32]byte // keep shards on separate cache lines
}

type packedAnswer struct {
	wire         []byte
	qtype, rcode int
	// alt, for a question whose answer meets one failback ramp, is the
	// answer from the level being left: sent instead of wire when the
	// query's draw (0 to 99) is weight or more.
	alt    *packedAnswer
	weight int
}

var cacheSeed = maphash.MakeSeed()

func (c *answerCache) shard(key []byte) *cacheShard {
	return &c.shards[maphash.Bytes(cacheSeed, key)%cacheShards]
}

func (c *answerCache) get(key []byte) *packedAnswer {
	sh := c.shard(key)
	sh.mu.RLock()
	a := sh.m[string(key)]
	sh.mu.RUnlock()
	return a
}

func (c *answerCache) put(key []byte, a *packedAnswer) {
	sh := c.shard(key)
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[string]*packedAnswer)
	}
	if len(sh.m) < cacheMax/cacheShards {
		sh.m[string(key)] = a
	}
	sh.mu.Unlock()
}

// variant is the packed answer to req from side of its ramp, or nil when
// it cannot be cached.
func (f *fastReader) variant(t *table, req *dns.Msg, side, qtype int) *packedAnswer {
	resp, _ := f.s.replyFrom(t, req, false, side, false)
	if resp == nil || resp.Truncated {
		return nil
	}
	wire, err := resp.Pack()
	if err != nil {
		return nil
	}
	return &packedAnswer{wire: wire, qtype: qtype, rcode: rcodeIndex(resp.Rcode)}
}

func (s *Server) decorateReader(r dns.Reader) dns.Reader {
	if s.noFast {
		return r
	}
	return &fastReader{Reader: r, s: s, key: make([]byte, 0, 300)}
}

// answer answers the query m and reports true, or reports false for the
// normal path to answer it. The answer to send is returned (nil: none);
// an answer from the cache is copied into *out, which is grown as needed.
func (f *fastReader) answer(m []byte, out *[]byte) ([]byte, bool) {
	if len(m) < 17 || m[2]&0xf8 != 0 || // QR = 0, opcode QUERY
		m[4] != 0 || m[5] != 1 || m[6] != 0 || m[7] != 0 || m[8] != 0 || m[9] != 0 || m[10] != 0 || m[11] > 1 {
		return nil, false
	}
	off := 12
	for {
		if off >= len(m) {
			return nil, false
		}
		l := int(m[off])
		if l == 0 {
			off++
			break
		}
		if l&0xc0 != 0 {
			return nil, false // a pointer (or a reserved label type)
		}
		off += 1 + l
		if off-12 > 255 {
			return nil, false
		}
	}
	qend := off + 4
	if qend > len(m) {
		return nil, false
	}
	variant := byte(0)
	limit := dns.MinMsgSize
	end := qend
	if m[11] == 1 {
		// The OPT record: root name, type 41, class = UDP size, TTL =
		// extended rcode, version, flags; no options.
		if qend+11 != len(m) || m[qend] != 0 || m[qend+1] != 0 || m[qend+2] != 41 ||
			m[qend+5] != 0 || m[qend+6] != 0 || m[qend+9] != 0 || m[qend+10] != 0 {
			return nil, false
		}
		size := int(m[qend+3])<<8 | int(m[qend+4])
		limit = min(max(size, dns.MinMsgSize), readBuffer)
		variant = 1
		if m[qend+7]&0x80 != 0 {
			variant = 2
		}
		end = qend + 11
	}
	if end != len(m) {
		return nil, false
	}
	t := f.s.table.Load()
	key := append(append(f.key[:0], m[12:qend]...), variant)
	f.key = key
	a := t.packed.get(key)
	if a != nil && a.alt != nil && rand.IntN(100) >= a.weight {
		a = a.alt
	}
	if a != nil && len(a.wire) <= limit {
		o := append((*out)[:0], a.wire...)
		*out = o
		o[0], o[1] = m[0], m[1]
		o[2] = o[2]&^0x01 | m[2]&0x01 // RD
		o[3] = o[3]&^0x10 | m[3]&0x10 // CD
		f.s.counters.count(a.qtype, a.rcode)
		return o, true
	}
	// The normal path, by hand, from the same table; its answer is kept
	// for the next query of these question bytes.
	req := new(dns.Msg)
	if err := req.Unpack(m); err != nil {
		return nil, false
	}
	resp, ramps := f.s.replyFrom(t, req, false, sideDraw, true)
	if resp == nil {
		return nil, true
	}
	wire, err := resp.Pack()
	if err != nil {
		f.s.log.Debug("packing an answer", "error", err)
		return nil, true
	}
	if !resp.Truncated {
		qtype := typeIndex(req.Question[0].Qtype)
		switch ramps.n {
		case 0:
			t.packed.put(key, &packedAnswer{wire: wire, qtype: qtype, rcode: rcodeIndex(resp.Rcode)})
		case 1:
			// A ramping site: both answers are kept, and every hit
			// draws which one it sends. An answer meeting more than one
			// ramp (a CNAME chain) is never cached.
			if lvl, alt := f.variant(t, req, sideLevel, qtype), f.variant(t, req, sideFrom, qtype); lvl != nil && alt != nil {
				lvl.alt, lvl.weight = alt, ramps.weight
				t.packed.put(key, lvl)
			}
		}
	}
	return wire, true
}
