package dns

import (
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/core/publish"
)

// TestLimiter checks the limiter's decisions against a fixed clock: rate
// answers per second per /24 and /56, every slip-th one over sent
// truncated, a new second starting afresh, exempt networks never limited.
func TestLimiter(t *testing.T) {
	l := newLimiter(rrlSettings{rate: 3, slip: 2, exempt: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}})
	tests := []struct {
		name string
		ip   string
		now  int64
		want []int
	}{
		{"the rate, then drop and slip in turn", "192.0.2.1", 100, []int{rrlSend, rrlSend, rrlSend, rrlDrop, rrlSlip, rrlDrop, rrlSlip}},
		{"the same /24 shares the count", "192.0.2.200", 100, []int{rrlDrop, rrlSlip}},
		{"another /24 has its own", "192.0.3.1", 100, []int{rrlSend, rrlSend, rrlSend, rrlDrop}},
		{"a new second starts afresh", "192.0.2.1", 101, []int{rrlSend, rrlSend, rrlSend, rrlDrop}},
		{"IPv6 counts per /56", "2001:db8:0:ff::1", 100, []int{rrlSend, rrlSend, rrlSend}},
		{"the same /56", "2001:db8:0:1::2", 100, []int{rrlDrop}},
		{"another /56", "2001:db8:0:100::1", 100, []int{rrlSend}},
		{"exempt", "198.51.100.7", 100, []int{rrlSend, rrlSend, rrlSend, rrlSend, rrlSend, rrlSend}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, want := range tc.want {
				if got := l.action(net.ParseIP(tc.ip), tc.now); got != want {
					t.Fatalf("answer %d to %s: action %d, want %d", i+1, tc.ip, got, want)
				}
			}
		})
	}
	if (*limiter)(nil).action(net.ParseIP("192.0.2.1"), 1) != rrlSend {
		t.Error("a limiter that is off limits")
	}
	if d, s := l.dropped.Load(), l.slipped.Load(); d != 6 || s != 3 {
		t.Errorf("dropped %d slipped %d, want 6 and 3", d, s)
	}
}

// TestRRL sends UDP queries from loopback (not exempt here) to a server
// whose clock stands still, with the fast path and without: past the rate
// the answers come back empty with the TC bit (slip 1), and the same
// question over TCP gets its records.
func TestRRL(t *testing.T) {
	for _, noFast := range []bool{false, true} {
		name := "fast path"
		if noFast {
			name = "normal path"
		}
		t.Run(name, func(t *testing.T) {
			hub := publish.NewHub()
			hub.Publish(fixture(7))
			cfg := newConfig(false)
			cfg.RRLRate, cfg.RRLSlip = 5, 1
			s, err := New(cfg, hub, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.noFast = noFast
			var sec atomic.Int64
			sec.Store(1000)
			s.rrl.clock = sec.Load
			if err := s.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			www := q{name: "www.cdn.example.net.", qtype: dns.TypeA}
			for i := range 12 {
				r := exchange(t, s.Addr(), www)
				full := len(r.Answer) == 2 && !r.Truncated
				slipped := len(r.Answer) == 0 && r.Truncated && r.Rcode == dns.RcodeSuccess && len(r.Question) == 1
				if i < 5 && !full || i >= 5 && !slipped {
					t.Fatalf("answer %d: TC %v, %d records; want %s", i+1, r.Truncated, len(r.Answer), map[bool]string{true: "the records", false: "empty and truncated"}[i < 5])
				}
			}
			if r := exchange(t, s.Addr(), q{name: www.name, qtype: dns.TypeA, tcp: true}); len(r.Answer) != 2 {
				t.Errorf("over TCP past the rate: %v; want the records", r.Answer)
			}
			sec.Add(1)
			if r := exchange(t, s.Addr(), www); len(r.Answer) != 2 {
				t.Errorf("the next second: %v; want the records", r.Answer)
			}
			if st := s.Stats(); st.RRLSlipped != 7 || st.RRLDropped != 0 {
				t.Errorf("slipped %d dropped %d, want 7 and 0", st.RRLSlipped, st.RRLDropped)
			}
		})
	}
}

// TestSlipReply checks the truncated answer built from query bytes.
func TestSlipReply(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("www.cdn.example.net.", dns.TypeA)
	m.SetEdns0(1232, true)
	wire, _ := m.Pack()
	r := new(dns.Msg)
	if err := r.Unpack(slipReply(wire)); err != nil {
		t.Fatal(err)
	}
	if !r.Response || !r.Truncated || r.Id != m.Id || len(r.Question) != 1 || !strings.EqualFold(r.Question[0].Name, "www.cdn.example.net.") || len(r.Answer)+len(r.Ns)+len(r.Extra) != 0 || !r.RecursionDesired {
		t.Errorf("slip reply %v", r)
	}
	if slipReply(wire[:5]) != nil {
		t.Error("a reply to a short packet")
	}
}
