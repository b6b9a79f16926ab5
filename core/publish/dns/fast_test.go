package dns

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/core/publish"
)

// TestFastPathSameBytes: the fast path sends, byte for byte, what the
// normal path sends, for the first query of a question (which fills the
// cache) and the following ones (answered from it), and counts them alike.
func TestFastPathSameBytes(t *testing.T) {
	hub := publish.NewHub()
	hub.Publish(bigSnapshot(1, 20))
	fast := start(t, newConfig(false), hub)
	slow, err := New(newConfig(false), hub, nil)
	if err != nil {
		t.Fatal(err)
	}
	slow.noFast = true
	if err := slow.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slow.Close() })

	var queries []*dns.Msg
	for _, name := range []string{"s1.cdn.example.net.", "S1.Cdn.EXAMPLE.net.", "nope.cdn.example.net.", "cdn.example.net.", "other.example.org."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSOA, dns.TypeNS, dns.TypeANY, dns.TypeMX} {
			for variant := range 4 {
				m := new(dns.Msg)
				m.SetQuestion(name, qt)
				m.RecursionDesired = variant&1 == 0
				m.CheckingDisabled = variant == 3
				if variant >= 2 {
					m.SetEdns0(1232, variant == 3)
				}
				queries = append(queries, m)
			}
		}
	}
	for round := range 4 {
		if round == 2 { // a new publication: the cached answers of the old table are not used
			hub.Publish(switched(2, 20))
			for fast.Stats().Version != 2 || slow.Stats().Version != 2 {
				time.Sleep(time.Millisecond)
			}
		}
		for i, m := range queries {
			m.Id = uint16(round*1000 + i)
			wire, err := m.Pack()
			if err != nil {
				t.Fatal(err)
			}
			a, b := exchangeRaw(t, fast.Addr(), wire), exchangeRaw(t, slow.Addr(), wire)
			if !bytes.Equal(a, b) {
				t.Fatalf("round %d, %v: fast path answered\n%x\nnormal path\n%x", round, m.Question[0], a, b)
			}
		}
	}
	fs, ss := fast.Stats(), slow.Stats()
	if len(fs.Queries) != len(ss.Queries) {
		t.Fatalf("counters differ: %v and %v", fs.Queries, ss.Queries)
	}
	for k, v := range ss.Queries {
		if fs.Queries[k] != v {
			t.Errorf("counter %v: fast %d, normal %d", k, fs.Queries[k], v)
		}
	}
}

func exchangeRaw(t *testing.T, addr string, q []byte) []byte {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(q); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}
