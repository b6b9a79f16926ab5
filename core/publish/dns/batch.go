package dns

// The UDP socket of the fast path, read and written in batches (issue 19).
// Profiled in a process of its own under BenchmarkDNSCompare's load, the
// fast path spent about 60% of its CPU time in recvmsg and sendmsg, one of
// each per query, and most of the rest around them: the library's
// ReadFromSessionUDP allocates an OOB buffer and a SessionUDP per packet,
// and its WriteToSessionUDP parses that OOB again for every answer. So the
// fast path owns the socket: it reads up to batchSize queries with one
// recvmmsg and sends the answers it found with one sendmmsg (as NSD does),
// through golang.org/x/net's ipv4 and ipv6 PacketConn; on other systems
// than Linux those read and write one message per call.
//
// The library still serves the socket (the listener handed to dns.Server is
// a udpSocket, which is not a *net.UDPConn, so the server reads through
// fastReader.ReadPacketConn and writes through udpSocket.WriteTo): every
// query the fast path does not take is handed to it, one per call, with the
// client's address, and answered by the normal path as before.
//
// Replies leave from the address the query was sent to. On a listener bound
// to one address the system does that by itself, and no control message is
// asked for. On a wildcard listener (0.0.0.0, ::; but on Windows and macOS,
// where the library does not either) the socket is asked for
// each query's destination address (IP_PKTINFO, IPV6_PKTINFO, as the
// library does) and every reply, on the fast path and on the normal one,
// carries it as its source, chosen as the library chooses it.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

const (
	// batchSize bounds the queries one recvmmsg reads (NSD reads 100).
	batchSize = 32
	// minBatch is the fewest slots a read offers: each read offers twice
	// as many as the last one filled, since preparing the slots costs as
	// much as reading does for a batch of one or two.
	minBatch = 4
	// oobSize holds the destination address control messages a
	// dual-stack socket may attach to one query (IP_PKTINFO and
	// IPV6_PKTINFO both, for an IPv4 query).
	oobSize = 128
	// oobCacheMax bounds the reply control messages kept, one per local
	// address queries arrive at.
	oobCacheMax = 256
)

// batchConn is what the fast path needs of the socket: *ipv4.PacketConn and
// *ipv6.PacketConn (their Message is the same type).
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// udpSocket is the UDP listener of a server with the fast path.
type udpSocket struct {
	*net.UDPConn
	batch batchConn
	// wildcard: bound to an unspecified address, so that replies must
	// name their source.
	wildcard bool
}

func newUDPSocket(c *net.UDPConn) (*udpSocket, error) {
	u := &udpSocket{UDPConn: c}
	la, _ := c.LocalAddr().(*net.UDPAddr)
	if la != nil && la.IP.To4() != nil {
		u.batch = ipv4.NewPacketConn(c)
	} else {
		u.batch = ipv6.NewPacketConn(c)
	}
	// The library asks for destinations on every system but Windows and
	// macOS (its udp.go and udp_no_control.go); so does the fast path.
	if (la == nil || la.IP.IsUnspecified()) && runtime.GOOS != "windows" && runtime.GOOS != "darwin" {
		u.wildcard = true
		// Both families, errors ignored unless both fail: the library's
		// choice (a dual-stack socket gets IPv4 queries too).
		err6 := ipv6.NewPacketConn(c).SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true)
		err4 := ipv4.NewPacketConn(c).SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true)
		if err6 != nil && err4 != nil {
			return nil, fmt.Errorf("asking for the destination of queries: %w", err4)
		}
	}
	return u, nil
}

// WriteTo sends the normal path's answers: to a clientAddr from the address
// its query was sent to.
func (u *udpSocket) WriteTo(b []byte, addr net.Addr) (int, error) {
	if c, ok := addr.(*clientAddr); ok {
		n, _, err := u.WriteMsgUDP(b, c.oob, c.UDPAddr)
		return n, err
	}
	return u.UDPConn.WriteTo(b, addr)
}

// clientAddr is the address of a client of a wildcard listener, with the
// control message that makes a reply leave from the query's destination
// (nil when the system did not say it).
type clientAddr struct {
	*net.UDPAddr
	oob []byte
}

// fastReader answers plain UDP queries in the server's read loop and hands
// every other packet to the normal path. One per listener, used by its read
// loop alone; the TCP server's keeps only the library's reader.
type fastReader struct {
	dns.Reader
	s   *Server
	key []byte

	// Made by the first read: the receive slots, each with its buffer
	// (and OOB on a wildcard listener), the answer buffers, one per slot,
	// and the answers of the batch being sent.
	in      []ipv4.Message
	slots   int // offered by the next read
	out     [][]byte
	send    []ipv4.Message
	sendBuf [][][]byte
	// pending are the batch's queries for the normal path, handed out one
	// per read from next on.
	pending []pendingQuery
	next    int
	// oobs are the reply control messages by query destination (wildcard
	// listeners only).
	oobs map[netip.Addr][]byte
}

type pendingQuery struct {
	m    []byte
	addr net.Addr
}

// ReadPacketConn is the server's read loop's call: it answers batches of
// queries until one needs the normal path, and returns that one.
func (f *fastReader) ReadPacketConn(conn net.PacketConn, timeout time.Duration) ([]byte, net.Addr, error) {
	u, ok := conn.(*udpSocket)
	if !ok {
		return f.Reader.(dns.PacketConnReader).ReadPacketConn(conn, timeout)
	}
	if f.in == nil {
		f.init(u)
	}
	for f.next == len(f.pending) {
		clear(f.pending)
		f.pending, f.next = f.pending[:0], 0
		if err := f.serveBatch(u); err != nil {
			return nil, nil, err
		}
	}
	p := f.pending[f.next]
	f.next++
	return p.m, p.addr, nil
}

func (f *fastReader) init(u *udpSocket) {
	f.in = make([]ipv4.Message, batchSize)
	f.out = make([][]byte, batchSize)
	f.send = make([]ipv4.Message, 0, batchSize)
	f.sendBuf = make([][][]byte, batchSize)
	for i := range f.in {
		f.in[i].Buffers = [][]byte{make([]byte, readBuffer)}
		if u.wildcard {
			f.in[i].OOB = make([]byte, oobSize)
		}
		f.sendBuf[i] = make([][]byte, 1)
	}
	f.pending = make([]pendingQuery, 0, batchSize)
	f.slots = minBatch
}

// serveBatch reads the queries waiting (at least one: it blocks until one
// comes), answers those the fast path takes with one write, and queues the
// others for the normal path.
func (f *fastReader) serveBatch(u *udpSocket) error {
	n, err := u.batch.ReadBatch(f.in[:f.slots], 0)
	if err != nil {
		return err
	}
	f.slots = min(max(2*n, minBatch), batchSize)
	f.send = f.send[:0]
	now := f.s.rrl.now()
	for i := range f.in[:n] {
		msg := &f.in[i]
		addr, _ := msg.Addr.(*net.UDPAddr)
		if addr == nil {
			continue
		}
		var oob []byte
		if u.wildcard {
			oob = f.replyOOB(msg.OOB[:msg.NN])
		}
		m := msg.Buffers[0][:msg.N]
		// Response rate limiting (rrl.go), for the fast path and the
		// normal one alike: every UDP query of this socket comes here.
		switch f.s.rrl.action(addr.IP, now) {
		case rrlDrop:
			continue
		case rrlSlip:
			if reply := slipReply(m); reply != nil {
				b := f.sendBuf[i]
				b[0] = reply
				f.send = append(f.send, ipv4.Message{Buffers: b, OOB: oob, Addr: addr})
			}
			continue
		}
		if reply, ok := f.answer(m, &f.out[i]); ok {
			if reply != nil {
				b := f.sendBuf[i]
				b[0] = reply
				f.send = append(f.send, ipv4.Message{Buffers: b, OOB: oob, Addr: addr})
			}
			continue
		}
		q := pendingQuery{m: append([]byte(nil), m...), addr: addr}
		if u.wildcard {
			q.addr = &clientAddr{UDPAddr: addr, oob: oob}
		}
		f.pending = append(f.pending, q)
	}
	f.flush(u.batch)
	return nil
}

// flush sends the batch's answers, in as many writes as the socket takes
// (sendmmsg may send part of a batch). sendmmsg reports an error only for
// the first message of a call: that answer is dropped, as a failed sendmsg
// dropped it, and the rest are sent. A full send buffer blocks until it has
// room, as a single write does.
func (f *fastReader) flush(c batchConn) {
	ms := f.send
	for len(ms) > 0 {
		n, err := c.WriteBatch(ms, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				break
			}
			f.s.log.Debug("writing an answer", "client", ms[0].Addr.String(), "error", err)
			n = 1
		}
		ms = ms[max(n, 1):]
	}
	clear(f.send) // the clients' addresses and the answers
	f.send = f.send[:0]
}

// replyOOB is the control message that makes a reply leave from the
// destination of the query whose control messages are oob, or nil when
// they do not say it: the destination read as the library reads it (IPv6
// first), sent as IP_PKTINFO when it is an IPv4 address (a mapped one
// too), as IPV6_PKTINFO otherwise, with no interface.
func (f *fastReader) replyOOB(oob []byte) []byte {
	var dst netip.Addr
	var cm6 ipv6.ControlMessage
	var cm4 ipv4.ControlMessage
	if cm6.Parse(oob) == nil && cm6.Dst != nil {
		dst, _ = netip.AddrFromSlice(cm6.Dst)
	} else if cm4.Parse(oob) == nil && cm4.Dst != nil {
		dst, _ = netip.AddrFromSlice(cm4.Dst)
	}
	if !dst.IsValid() {
		return nil
	}
	if b, ok := f.oobs[dst]; ok {
		return b
	}
	var b []byte
	if dst.Unmap().Is4() {
		b = (&ipv4.ControlMessage{Src: net.IP(dst.AsSlice())}).Marshal()
	} else {
		b = (&ipv6.ControlMessage{Src: net.IP(dst.AsSlice())}).Marshal()
	}
	if f.oobs == nil {
		f.oobs = make(map[netip.Addr][]byte)
	}
	if len(f.oobs) < oobCacheMax {
		f.oobs[dst] = b
	}
	return b
}
