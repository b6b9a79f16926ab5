package dns

// Response rate limiting (issue 35). An open authoritative server on UDP
// is a reflection amplifier: an attacker sends queries with a victim's
// address as their source, and the answers flood the victim. As NSD, Knot
// and BIND do, vigil limits the UDP answers sent to one client network (a
// /24 for IPv4, a /56 for IPv6) to rate per second. Past the limit an
// answer is dropped, except every slip-th one, which is sent as an empty
// truncated answer (TC set): a real resolver behind that network retries
// over TCP, which no spoofed source can do, and gets its answer. TCP
// answers are never limited. Loopback clients are exempt by default.
//
// The counts live in a fixed table of buckets indexed by a hash of the
// network: bounded memory whatever the sources, one short lock per UDP
// answer. Two networks that share a bucket share its count until one of
// them wins it (the newer replaces the older), as in NSD.

import (
	"fmt"
	"hash/maphash"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/core/config"
)

const (
	rrlShards  = 16
	rrlBuckets = 1 << 12 // per shard
	// rrlV4Bits and rrlV6Bits are the client networks counted together.
	rrlV4Bits = 24
	rrlV6Bits = 56
)

// Actions of the limiter on one answer.
const (
	rrlSend = iota
	rrlDrop
	rrlSlip
)

// rrlSettings configure the limiter; rate 0 turns it off.
type rrlSettings struct {
	rate, slip int
	exempt     []netip.Prefix
}

type rrlBucket struct {
	net   netip.Prefix
	sec   int64  // the second count belongs to
	count uint32 // answers in sec
	over  uint32 // limited answers since the bucket was taken, for slip
}

type rrlShard struct {
	mu sync.Mutex
	b  [rrlBuckets]rrlBucket
}

// limiter counts UDP answers per client network.
type limiter struct {
	st               rrlSettings
	shards           [rrlShards]rrlShard
	seed             maphash.Seed
	dropped, slipped atomic.Uint64
	// clock returns the Unix second (tests fix it).
	clock func() int64
}

func newLimiter(st rrlSettings) *limiter {
	if st.rate <= 0 {
		return nil
	}
	return &limiter{st: st, seed: maphash.MakeSeed(), clock: func() int64 { return time.Now().Unix() }}
}

// now returns the limiter's current second (0 when it is off).
func (l *limiter) now() int64 {
	if l == nil {
		return 0
	}
	return l.clock()
}

// action decides what becomes of a UDP answer to ip at the second now
// (Unix seconds).
func (l *limiter) action(ip net.IP, now int64) int {
	if l == nil {
		return rrlSend
	}
	a, _ := netip.AddrFromSlice(ip)
	a = a.Unmap()
	for _, p := range l.st.exempt {
		if p.Contains(a) {
			return rrlSend
		}
	}
	bits := rrlV4Bits
	if a.Is6() {
		bits = rrlV6Bits
	}
	n, _ := a.Prefix(bits)
	h := maphash.Comparable(l.seed, n)
	sh := &l.shards[h%rrlShards]
	sh.mu.Lock()
	b := &sh.b[(h/rrlShards)%rrlBuckets]
	if b.net != n {
		*b = rrlBucket{net: n, sec: now}
	}
	if b.sec != now {
		b.sec, b.count = now, 0
	}
	b.count++
	if b.count <= uint32(l.st.rate) {
		sh.mu.Unlock()
		return rrlSend
	}
	b.over++
	slip := l.st.slip > 0 && b.over%uint32(l.st.slip) == 0
	sh.mu.Unlock()
	if slip {
		l.slipped.Add(1)
		return rrlSlip
	}
	l.dropped.Add(1)
	return rrlDrop
}

// slipReply is the empty truncated answer to the query m (its header and
// question, QR and TC set, no records), or nil when m is not a query
// with one question.
func slipReply(m []byte) []byte {
	if len(m) < 12 || m[2]&0x80 != 0 || m[4] != 0 || m[5] != 1 {
		return nil
	}
	off := 12
	for {
		if off >= len(m) {
			return nil
		}
		l := int(m[off])
		if l == 0 {
			off++
			break
		}
		if l&0xc0 != 0 {
			return nil
		}
		off += 1 + l
	}
	if off+4 > len(m) {
		return nil
	}
	r := append([]byte(nil), m[:off+4]...)
	r[2] = r[2]&0x79 | 0x80 | 0x02 // QR, TC; keep opcode and RD
	r[3] &= 0x10                   // keep CD; rcode NOERROR
	clear(r[6:12])                 // no answer, authority or additional record
	return r
}

// slipMsg is slipReply for a parsed request.
func slipMsg(req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Truncated = true
	return m
}

// rrlFromConfig reads the limiter's settings.
func rrlFromConfig(cfg *config.DNSPublisher) (rrlSettings, error) {
	st := rrlSettings{rate: cfg.RRLRate, slip: cfg.RRLSlip}
	if st.rate < 0 || st.slip < 0 {
		return st, fmt.Errorf("rrl_rate %d and rrl_slip %d must not be negative", st.rate, st.slip)
	}
	for _, e := range cfg.RRLExempt {
		p, err := config.ParsePrefix(e)
		if err != nil {
			return st, fmt.Errorf("rrl_exempt: %w", err)
		}
		st.exempt = append(st.exempt, p)
	}
	return st, nil
}
