package dns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"

	"github.com/vigilcdn/vigil/core/publish"
)

// fakeBatch is a batchConn that hands out prepared batches of packets and
// records what is written. writeMax bounds the messages one WriteBatch
// takes (a socket with little room left), and failTo makes the first write
// of a message to that port fail, as sendmmsg fails: on its first message.
type fakeBatch struct {
	batches  [][]fakePacket
	writes   [][]ipv4.Message // each call's messages, copied
	writeMax int
	failTo   int
	failed   bool
}

type fakePacket struct {
	wire []byte
	from *net.UDPAddr
}

func (c *fakeBatch) ReadBatch(ms []ipv4.Message, _ int) (int, error) {
	if len(c.batches) == 0 {
		return 0, net.ErrClosed
	}
	b := c.batches[0]
	if len(b) > len(ms) {
		b, c.batches[0] = b[:len(ms)], b[len(ms):]
	} else {
		c.batches = c.batches[1:]
	}
	for i, p := range b {
		ms[i].N = copy(ms[i].Buffers[0], p.wire)
		ms[i].NN = 0
		ms[i].Addr = p.from
	}
	return len(b), nil
}

func (c *fakeBatch) WriteBatch(ms []ipv4.Message, _ int) (int, error) {
	n := len(ms)
	if c.writeMax > 0 {
		n = min(n, c.writeMax)
	}
	for i, m := range ms[:n] {
		if c.failTo != 0 && !c.failed && m.Addr.(*net.UDPAddr).Port == c.failTo {
			if i == 0 {
				c.failed = true
				return -1, &net.OpError{Op: "write", Net: "udp", Err: syscall.EPERM}
			}
			n = i // the ones before it are sent; the next call fails
			break
		}
	}
	var got []ipv4.Message
	for _, m := range ms[:n] {
		got = append(got, ipv4.Message{Buffers: [][]byte{slices.Clone(m.Buffers[0])}, Addr: m.Addr, OOB: m.OOB})
	}
	c.writes = append(c.writes, got)
	return n, nil
}

// fakeReader is s's fast reader over conn, its next read offering every
// slot.
func fakeReader(t *testing.T, s *Server, conn *fakeBatch) (*fastReader, *udpSocket) {
	t.Helper()
	f, ok := s.decorateReader(nil).(*fastReader)
	if !ok {
		t.Fatal("no fast reader")
	}
	u := &udpSocket{batch: conn}
	f.init(u)
	f.slots = batchSize
	return f, u
}

// normalAnswer is the normal path's answer to wire, as the library packs
// it, or nil when it sends none.
func normalAnswer(t *testing.T, s *Server, wire []byte) []byte {
	t.Helper()
	req := new(dns.Msg)
	if err := req.Unpack(wire); err != nil {
		t.Fatal(err)
	}
	m := s.reply(req, false)
	if m == nil {
		return nil
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func query(id uint16, name string, qtype uint16, mutate func(*dns.Msg)) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = id
	if mutate != nil {
		mutate(m)
	}
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}

// TestBatchMixed: one batch of queries for both paths. The fast path's
// answers (a cache miss, answered and cached, then hits of it in the same
// batch) leave in one write, each the normal path's bytes, to its client;
// the others are handed to the normal path one read at a time, in order,
// with their clients' addresses; then the reader reads again.
func TestBatchMixed(t *testing.T) {
	hub := publish.NewHub()
	hub.Publish(fixture(7))
	s, err := New(newConfig(false), hub, nil)
	if err != nil {
		t.Fatal(err)
	}
	cookie := func(m *dns.Msg) {
		m.SetEdns0(1232, false)
		o := m.IsEdns0()
		o.Option = append(o.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	}
	twoQ := query(3, "www.cdn.example.net.", dns.TypeA, nil)
	twoQ = append(append(twoQ[:12:12], twoQ[12:]...), twoQ[12:]...)
	twoQ[5] = 2
	response := query(5, "www.cdn.example.net.", dns.TypeA, func(m *dns.Msg) { m.Response = true })
	packets := []struct {
		wire []byte
		fast bool
	}{
		{query(1, "www.cdn.example.net.", dns.TypeA, nil), true}, // a miss: answered, cached
		{twoQ, false}, // two questions: FORMERR from the library
		{query(2, "www.cdn.example.net.", dns.TypeA, nil), true},     // a hit
		{query(4, "www.cdn.example.net.", dns.TypeA, cookie), false}, // an EDNS option
		{response, false}, // a response: the library drops it
		{query(6, "WWW.cdn.example.net.", dns.TypeAAAA, nil), true}, // another question
		{query(7, "www.cdn.example.net.", dns.TypeA, func(m *dns.Msg) { // another variant: EDNS, DO
			m.SetEdns0(1232, true)
		}), true},
		{query(8, "www.cdn.example.net.", dns.TypeA, func(m *dns.Msg) { m.RecursionDesired = false }), true},
	}
	var batch []fakePacket
	for i, p := range packets {
		batch = append(batch, fakePacket{p.wire, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 10000 + i}})
	}
	conn := &fakeBatch{batches: [][]fakePacket{batch}}
	f, u := fakeReader(t, s, conn)

	var normal []int
	for i, p := range packets {
		if !p.fast {
			normal = append(normal, i)
		}
	}
	for k, i := range normal {
		m, addr, err := f.ReadPacketConn(u, time.Second)
		if err != nil {
			t.Fatalf("read %d: %v", k, err)
		}
		if !bytes.Equal(m, packets[i].wire) || addr.String() != batch[i].from.String() {
			t.Fatalf("read %d: %x from %v, want packet %d (%x from %v)", k, m, addr, i, packets[i].wire, batch[i].from)
		}
		if k == 0 {
			// The fast answers left before the first query was handed on.
			if len(conn.writes) != 1 {
				t.Fatalf("%d writes, want the batch's fast answers in one", len(conn.writes))
			}
		}
	}
	var want []fakePacket
	for i, p := range packets {
		if p.fast {
			want = append(want, fakePacket{normalAnswer(t, s, p.wire), batch[i].from})
		}
	}
	got := conn.writes[0]
	if len(got) != len(want) {
		t.Fatalf("%d answers written, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].Buffers[0], want[i].wire) || got[i].Addr != want[i].from || got[i].OOB != nil {
			t.Errorf("answer %d: %x to %v (oob %x), want %x to %v", i, got[i].Buffers[0], got[i].Addr, got[i].OOB, want[i].wire, want[i].from)
		}
	}
	if _, _, err := f.ReadPacketConn(u, time.Second); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the read after the batch: %v, want the socket's error", err)
	}
}

// TestBatchPartialWrites: a socket that takes part of a batch per write
// (sendmmsg on a send buffer running out of room) gets the rest in the
// following writes, and an answer whose write fails is dropped alone: every
// other one is sent once, in order.
func TestBatchPartialWrites(t *testing.T) {
	hub := publish.NewHub()
	hub.Publish(bigSnapshot(1, 20))
	s, err := New(newConfig(false), hub, nil)
	if err != nil {
		t.Fatal(err)
	}
	var batch []fakePacket
	for i := range batchSize {
		batch = append(batch, fakePacket{query(uint16(i), fmt.Sprintf("s%d.cdn.example.net.", i%20), dns.TypeA, nil),
			&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 20000 + i}})
	}
	const failed = 5
	conn := &fakeBatch{batches: [][]fakePacket{batch}, writeMax: 3, failTo: 20000 + failed}
	f, u := fakeReader(t, s, conn)
	if _, _, err := f.ReadPacketConn(u, time.Second); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read: %v", err)
	}
	var sent []ipv4.Message
	for _, w := range conn.writes {
		if len(w) > 3 {
			t.Fatalf("a write of %d messages, more than the socket takes", len(w))
		}
		sent = append(sent, w...)
	}
	if len(sent) != batchSize-1 {
		t.Fatalf("%d answers sent, want %d", len(sent), batchSize-1)
	}
	k := 0
	for i, p := range batch {
		if i == failed {
			continue
		}
		if sent[k].Addr != p.from || !bytes.Equal(sent[k].Buffers[0], normalAnswer(t, s, p.wire)) {
			t.Fatalf("answer %d: %x to %v, want the answer to query %d", k, sent[k].Buffers[0], sent[k].Addr, i)
		}
		k++
	}
}

// TestBatchBurst: many more queries than a batch holds, sent at once
// without waiting for answers, so that the server's receive buffer is full
// and its reads come in full batches (and the system drops what does not
// fit): every answer that comes back is, byte for byte, the normal path's,
// and the server still answers afterwards.
func TestBatchBurst(t *testing.T) {
	hub := publish.NewHub()
	hub.Publish(bigSnapshot(1, 20))
	fast := start(t, newConfig(false), hub)
	ref, err := New(newConfig(false), hub, nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []func(id uint16) []byte{
		func(id uint16) []byte { return query(id, fmt.Sprintf("s%d.cdn.example.net.", id%20), dns.TypeA, nil) },
		func(id uint16) []byte {
			return query(id, fmt.Sprintf("s%d.cdn.example.net.", id%20), dns.TypeAAAA, func(m *dns.Msg) { m.SetEdns0(1232, id%2 == 0) })
		},
		func(id uint16) []byte { return query(id, "nope.cdn.example.net.", dns.TypeA, nil) },
		func(id uint16) []byte { // the normal path: two OPT records
			return query(id, "s1.cdn.example.net.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false); m.SetEdns0(1232, false) })
		},
	}
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadBuffer(8 << 20)
	to, err := net.ResolveUDPAddr("udp", fast.Addr())
	if err != nil {
		t.Fatal(err)
	}
	const n = 4000
	sent := map[uint16][]byte{}
	for i := range n {
		id := uint16(i)
		q := kinds[i%len(kinds)](id)
		sent[id] = q
		if _, err := c.WriteToUDP(q, to); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	buf := make([]byte, 4096)
	for {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		k, _, err := c.ReadFromUDP(buf)
		if err != nil {
			break
		}
		id := uint16(buf[0])<<8 | uint16(buf[1])
		q, ok := sent[id]
		if !ok {
			t.Fatalf("an answer to no query: %x", buf[:k])
		}
		delete(sent, id)
		if want := normalAnswer(t, ref, q); !bytes.Equal(buf[:k], want) {
			t.Fatalf("query %d: answered\n%x\nthe normal path answers\n%x", id, buf[:k], want)
		}
		got++
	}
	if got < 2*batchSize {
		t.Fatalf("%d answers to %d queries", got, n)
	}
	t.Logf("%d answers to %d queries sent at once", got, n)
	r := exchange(t, fast.Addr(), q{name: "s3.cdn.example.net.", qtype: dns.TypeA})
	if len(r.Answer) != 2 {
		t.Fatalf("after the burst: %v", r)
	}
}

// TestWildcardSource: a server listening on a wildcard address answers
// from the address each query was sent to, on the fast path (a miss, then a
// hit) and on the normal one (FORMERR for two OPT records), for IPv4 and,
// where the system has IPv6, for IPv6 and for IPv4 on a dual-stack socket.
func TestWildcardSource(t *testing.T) {
	cases := []struct {
		listen string
		dsts   []net.IP
	}{
		{"0.0.0.0:0", []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2)}},
		{"[::]:0", []net.IP{net.IPv6loopback, net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 3)}},
	}
	for _, tc := range cases {
		t.Run(tc.listen, func(t *testing.T) {
			hub := publish.NewHub()
			hub.Publish(bigSnapshot(1, 20))
			cfg := newConfig(false)
			cfg.Listen = tc.listen
			s, err := New(cfg, hub, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Skipf("cannot listen on %s: %v", tc.listen, err)
			}
			t.Cleanup(func() { s.Close() })
			_, port, _ := net.SplitHostPort(s.Addr())
			for _, ip := range tc.dsts {
				network := "udp4"
				if ip.To4() == nil {
					network = "udp6"
				}
				c, err := net.ListenUDP(network, nil)
				if err != nil {
					t.Logf("no %s socket: %v", network, err)
					continue
				}
				defer c.Close()
				to, _ := net.ResolveUDPAddr(network, net.JoinHostPort(ip.String(), port))
				for i, wire := range [][]byte{
					query(1, "s1.cdn.example.net.", dns.TypeA, nil),
					query(2, "s1.cdn.example.net.", dns.TypeA, nil),
					query(3, "s1.cdn.example.net.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false); m.SetEdns0(1232, false) }),
				} {
					if _, err := c.WriteToUDP(wire, to); err != nil {
						if i == 0 {
							t.Logf("cannot send to %v: %v", to, err)
							break
						}
						t.Fatal(err)
					}
					buf := make([]byte, 4096)
					_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
					k, from, err := c.ReadFromUDP(buf)
					if err != nil {
						t.Fatalf("query %d to %v: %v", i, to, err)
					}
					if !from.IP.Equal(ip) || from.Port != to.Port {
						t.Fatalf("query %d to %v answered from %v", i, to, from)
					}
					if buf[1] != wire[1] || k < 12 {
						t.Fatalf("query %d to %v: answer %x", i, to, buf[:k])
					}
				}
			}
		})
	}
}

// TestCloseWhileReading: Close returns promptly while clients keep the read
// loop busy, the loop ends, and the port is free again.
func TestCloseWhileReading(t *testing.T) {
	hub := publish.NewHub()
	hub.Publish(bigSnapshot(1, 20))
	s, err := New(newConfig(false), hub, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			conn, err := net.Dial("udp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			buf := make([]byte, 4096)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = conn.Write(query(uint16(i), fmt.Sprintf("s%d.cdn.example.net.", (i+c)%20), dns.TypeA, nil))
				_ = conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
				_, _ = conn.Read(buf)
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(100 * time.Millisecond)
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return while the read loop was busy")
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("the port is still taken after Close: %v", err)
	}
	pc.Close()
}

// TestBatchSlots: a read offers minBatch slots at first, twice as many as
// the last read filled after that (up to batchSize), and fewer again when
// the queue drains; queries beyond the slots offered wait for the next read
// and are all answered, in order.
func TestBatchSlots(t *testing.T) {
	hub := publish.NewHub()
	hub.Publish(bigSnapshot(1, 20))
	s, err := New(newConfig(false), hub, nil)
	if err != nil {
		t.Fatal(err)
	}
	var queue []fakePacket
	for i := range 100 {
		queue = append(queue, fakePacket{query(uint16(i), fmt.Sprintf("s%d.cdn.example.net.", i%20), dns.TypeA, nil),
			&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 30000 + i}})
	}
	conn := &offeredBatch{fakeBatch: fakeBatch{batches: [][]fakePacket{queue}}}
	f, ok := s.decorateReader(nil).(*fastReader)
	if !ok {
		t.Fatal("no fast reader")
	}
	if _, _, err := f.ReadPacketConn(&udpSocket{batch: conn}, time.Second); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read: %v", err)
	}
	if want := []int{4, 8, 16, 32, 32, 32, 16}; !slices.Equal(conn.offered, want) {
		t.Errorf("reads offered %v slots, want %v", conn.offered, want)
	}
	var sent []ipv4.Message
	for _, w := range conn.writes {
		sent = append(sent, w...)
	}
	if len(sent) != len(queue) {
		t.Fatalf("%d answers to %d queries", len(sent), len(queue))
	}
	for i, p := range queue {
		if sent[i].Addr != p.from || !bytes.Equal(sent[i].Buffers[0], normalAnswer(t, s, p.wire)) {
			t.Fatalf("answer %d: %x to %v", i, sent[i].Buffers[0], sent[i].Addr)
		}
	}
}

// offeredBatch records how many slots each read offers.
type offeredBatch struct {
	fakeBatch
	offered []int
}

func (c *offeredBatch) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	c.offered = append(c.offered, len(ms))
	return c.fakeBatch.ReadBatch(ms, flags)
}
