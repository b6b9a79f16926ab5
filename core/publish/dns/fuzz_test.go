package dns

import (
	"testing"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/core/publish"
)

// FuzzReply feeds raw wire bytes down the path the server takes: the
// header check, the library's parser, then reply. It must never panic,
// and every answer must pack, parse back and fit the transport.
func FuzzReply(f *testing.F) {
	in := uint16(dns.ClassINET)
	for _, seed := range [][]byte{
		cat(header(1, 0, 1, 0, 0, 0), question(dns.TypeA, in)),
		cat(header(2, 0, 1, 0, 0, 1), question(dns.TypeAAAA, in), []byte{0, 0, 41, 0x10, 0, 0, 0, 0x80, 0, 0, 0}),
		cat(header(3, 0, 1, 0, 0, 1), question(dns.TypeANY, in), []byte{0, 0, 41, 0x10, 0, 0, 1, 0, 0, 0, 0}),
		cat(header(4, 0, 1, 0, 0, 0), []byte("\x04many\x03cdn\x07example\x03net\x00\x00\x01\x00\x01")),
		cat(header(5, 0, 1, 0, 0, 0), question(dns.TypeA, dns.ClassCHAOS)),
		cat(header(6, 5<<11, 1, 0, 0, 0), question(dns.TypeSOA, in)),
		cat(header(7, 0, 2, 0, 0, 0), question(dns.TypeA, in), question(dns.TypeA, in)),
		cat(header(8, 0, 1, 0, 0, 0), []byte{0xc0, 12, 0, 1, 0, 1}),
		header(9, 0, 0, 0, 0, 0),
		{0, 1, 2},
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	hub := publish.NewHub()
	hub.Publish(fixture(7))
	open, err := New(newConfig(false), hub, nil)
	if err != nil {
		f.Fatal(err)
	}
	closed, err := New(newConfig(true), hub, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, wire []byte, tcp bool) {
		s := open
		if len(wire) > 0 && wire[0]&1 == 1 {
			s = closed
		}
		req := new(dns.Msg)
		if err := req.Unpack(wire); err != nil {
			return // the library answers FORMERR (or nothing) itself
		}
		if len(wire) >= 12 {
			var dh dns.Header
			dh.Id = uint16(wire[0])<<8 | uint16(wire[1])
			dh.Bits = uint16(wire[2])<<8 | uint16(wire[3])
			dh.Qdcount = uint16(wire[4])<<8 | uint16(wire[5])
			s.accept(dh)
		}
		m := s.reply(req, tcp)
		if m == nil {
			if !req.Response {
				t.Fatal("no answer to a request")
			}
			return
		}
		b, err := m.Pack()
		if err != nil {
			t.Fatalf("answer does not pack: %v\n%v", err, m)
		}
		if !tcp && len(b) > readBuffer {
			t.Fatalf("UDP answer of %d bytes", len(b))
		}
		back := new(dns.Msg)
		if err := back.Unpack(b); err != nil {
			t.Fatalf("answer does not parse back: %v", err)
		}
		if back.Id != req.Id || !back.Response {
			t.Fatalf("answer id %d response %v to request %d", back.Id, back.Response, req.Id)
		}
	})
}
