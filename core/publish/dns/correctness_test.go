package dns

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/core/publish"
)

// The correctness fixes of issue 19, found by running real tools against
// the server: in-zone name servers have addresses, two OPT records are a
// FORMERR, and an escaped dot does not end a label.
func TestCorrectness(t *testing.T) {
	cfg := newConfig(false)
	cfg.NS = []string{"ns1.cdn.example.net.", "ns2.cdn.example.net.", "ns.other.example.org."}
	cfg.NSAddresses = map[string][]string{"ns1.cdn.example.net.": {"192.0.2.53", "2001:db8::53"}, "NS2.cdn.example.net.": {"192.0.2.54"}}
	hub := publish.NewHub()
	hub.Publish(fixture(7))
	s := start(t, cfg, hub)

	two := func(m *dns.Msg) { m.SetEdns0(1232, false); m.SetEdns0(1232, false) }
	tests := []struct {
		name   string
		q      q
		mutate func(*dns.Msg)
		rcode  int
		aa     bool
		answer []string
		extra  []string
	}{
		{"in-zone name server A", q{name: "ns1.cdn.example.net.", qtype: dns.TypeA}, nil, dns.RcodeSuccess, true, []string{"A 192.0.2.53"}, nil},
		{"in-zone name server AAAA", q{name: "ns1.cdn.example.net.", qtype: dns.TypeAAAA}, nil, dns.RcodeSuccess, true, []string{"AAAA 2001:db8::53"}, nil},
		{"in-zone name server, case folded", q{name: "NS2.CDN.example.net.", qtype: dns.TypeA}, nil, dns.RcodeSuccess, true, []string{"A 192.0.2.54"}, nil},
		{"name server without AAAA: NODATA", q{name: "ns2.cdn.example.net.", qtype: dns.TypeAAAA}, nil, dns.RcodeSuccess, true, nil, nil},
		{"NS with glue", q{name: zone, qtype: dns.TypeNS}, nil, dns.RcodeSuccess, true,
			[]string{"NS ns.other.example.org.", "NS ns1.cdn.example.net.", "NS ns2.cdn.example.net."},
			[]string{"A 192.0.2.53", "A 192.0.2.54", "AAAA 2001:db8::53"}},
		{"two OPT records: FORMERR", q{name: "www.cdn.example.net.", qtype: dns.TypeA}, two, dns.RcodeFormatError, false, nil, nil},
		{"two OPT records over TCP", q{name: "www.cdn.example.net.", qtype: dns.TypeA, tcp: true}, two, dns.RcodeFormatError, false, nil, nil},
		{"escaped dot outside the zone: REFUSED", q{name: `www\.cdn.example.net.`, qtype: dns.TypeA}, nil, dns.RcodeRefused, false, nil, nil},
		{"escaped dot at the apex label: REFUSED", q{name: `cdn\.example.net.`, qtype: dns.TypeA}, nil, dns.RcodeRefused, false, nil, nil},
		{"escaped backslash before the dot: in the zone", q{name: `www\\.cdn.example.net.`, qtype: dns.TypeA}, nil, dns.RcodeNameError, true, nil, nil},
		{"escaped dot inside the zone: NXDOMAIN", q{name: `a\.b.cdn.example.net.`, qtype: dns.TypeA}, nil, dns.RcodeNameError, true, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := new(dns.Msg)
			m.SetQuestion(tt.q.name, tt.q.qtype)
			m.RecursionDesired = false
			if tt.mutate != nil {
				tt.mutate(m)
			}
			c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
			if tt.q.tcp {
				c.Net = "tcp"
			}
			r, _, err := c.Exchange(m, s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			if r.Rcode != tt.rcode || r.Authoritative != tt.aa {
				t.Fatalf("rcode %s aa %v, want %s aa %v\n%v", dns.RcodeToString[r.Rcode], r.Authoritative, dns.RcodeToString[tt.rcode], tt.aa, r)
			}
			if got := rdata(r.Answer); !slices.Equal(got, tt.answer) {
				t.Errorf("answer %q, want %q", got, tt.answer)
			}
			if got := rdata(r.Extra); !slices.Equal(got, tt.extra) {
				t.Errorf("additional %q, want %q", got, tt.extra)
			}
			if tt.rcode == dns.RcodeFormatError && r.IsEdns0() != nil {
				t.Error("a FORMERR for two OPT records carries an OPT record")
			}
		})
	}
}

// TestCompressed: answers compress names (RFC 1035 4.1.4), so the wire
// answer is the compressed size, not the plain one.
func TestCompressed(t *testing.T) {
	s, _ := startWith(t, false, fixture(7))
	for _, qq := range []q{
		{name: "www.cdn.example.net.", qtype: dns.TypeA},
		{name: "www.cdn.example.net.", qtype: dns.TypeMX}, // NODATA with the SOA
		{name: "nope.cdn.example.net.", qtype: dns.TypeA}, // NXDOMAIN with the SOA
		{name: zone, qtype: dns.TypeNS},
	} {
		m := new(dns.Msg)
		m.SetQuestion(qq.name, qq.qtype)
		wire, _ := m.Pack()
		c, err := net.Dial("udp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(wire); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		n, err := c.Read(buf)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		r := new(dns.Msg)
		if err := r.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		plain, _ := r.Pack()
		r.Compress = true
		compressed, _ := r.Pack()
		if n != len(compressed) || n >= len(plain) {
			t.Errorf("%s %s: %d bytes on the wire, %d compressed, %d plain", qq.name, dns.TypeToString[qq.qtype], n, len(compressed), len(plain))
		}
	}
}
