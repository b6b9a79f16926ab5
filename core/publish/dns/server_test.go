package dns

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/sdk/publication"
)

const zone = "cdn.example.net."

func orig(name, addr, state string) publication.Origin {
	return publication.Origin{Name: name, Address: addr, State: state}
}

func site(host string, origins ...publication.Origin) publication.Site {
	return publication.Site{Name: strings.Split(host, ".")[0], Hostname: host, Level: 1, Origins: origins}
}

// fixture is a snapshot with one site per answer kind.
func fixture(version uint64) *publication.Snapshot {
	many := site("many.cdn.example.net")
	for i := range 60 {
		many.Origins = append(many.Origins, orig(fmt.Sprint("o", i), fmt.Sprintf("https://198.51.100.%d", i+1), "healthy"))
	}
	return &publication.Snapshot{Version: version, Sites: []publication.Site{
		site("www.cdn.example.net",
			orig("a", "https://203.0.113.10:8443", "healthy"),
			orig("b", "https://203.0.113.11", "unknown"),
			orig("c", "https://203.0.113.12", "unhealthy"),
			orig("d", "https://[2001:db8::1]:443", "healthy")),
		site("cname.cdn.example.net", orig("a", "https://backup.example.net", "healthy")),
		site("mixed.cdn.example.net",
			orig("a", "https://host.example.net", "healthy"),
			orig("b", "https://203.0.113.20", "unknown")),
		site("hosts.cdn.example.net",
			orig("a", "https://a.example.net", "unknown"),
			orig("b", "https://b.example.net", "healthy"),
			orig("c", "https://c.example.net", "unhealthy")),
		site("down.cdn.example.net",
			orig("a", "https://203.0.113.30", "unhealthy"),
			orig("b", "https://203.0.113.31", "unhealthy")),
		site("empty.cdn.example.net"),
		site("v6.cdn.example.net", orig("a", "http://[2001:db8::2]", "unknown")),
		site("deep.x.cdn.example.net", orig("a", "https://203.0.113.40", "healthy")),
		site("chase.cdn.example.net", orig("a", "https://WWW.cdn.example.net.", "healthy")),
		site("outside.example.org", orig("a", "https://203.0.113.50", "healthy")),
		many,
	}}
}

func newConfig(failClosed bool) *config.DNSPublisher {
	return &config.DNSPublisher{Listen: "127.0.0.1:0", Zone: zone, TTL: 30, NS: []string{"ns1.cdn.example.net."}, FailClosed: failClosed}
}

// start runs a server on loopback port 0 that follows hub.
func start(t testing.TB, cfg *config.DNSPublisher, hub *publish.Hub) *Server {
	t.Helper()
	s, err := New(cfg, hub, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func startWith(t testing.TB, failClosed bool, snap *publication.Snapshot) (*Server, *publish.Hub) {
	t.Helper()
	hub := publish.NewHub()
	hub.Publish(snap)
	return start(t, newConfig(failClosed), hub), hub
}

type q struct {
	name  string
	qtype uint16
	tcp   bool
	edns  uint16 // 0: no OPT record
}

func exchange(t testing.TB, addr string, qq q) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(qq.name, qq.qtype)
	m.RecursionDesired = false
	if qq.edns > 0 {
		m.SetEdns0(qq.edns, false)
	}
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
	if qq.tcp {
		c.Net = "tcp"
	}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", qq.name, dns.TypeToString[qq.qtype], c.Net, err)
	}
	if r.Id != m.Id {
		t.Fatalf("answer id %d, want %d", r.Id, m.Id)
	}
	return r
}

// rdata renders records as "TYPE rdata", sorted.
func rdata(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		out = append(out, dns.TypeToString[rr.Header().Rrtype]+" "+strings.TrimPrefix(rr.String(), rr.Header().String()))
	}
	slices.Sort(out)
	return out
}

const soaData = "SOA ns1.cdn.example.net. hostmaster.cdn.example.net. 7 3600 600 604800 30"

func TestAnswers(t *testing.T) {
	s, _ := startWith(t, false, fixture(7))
	tests := []struct {
		name   string
		q      q
		rcode  int
		answer []string
		soa    bool // SOA in the authority section
	}{
		{"A healthy and unknown, unhealthy left out", q{name: "www.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeSuccess,
			[]string{"A 203.0.113.10", "A 203.0.113.11"}, false},
		{"AAAA", q{name: "www.cdn.example.net.", qtype: dns.TypeAAAA}, dns.RcodeSuccess, []string{"AAAA 2001:db8::1"}, false},
		{"case-insensitive", q{name: "WwW.CDN.Example.NET.", qtype: dns.TypeA}, dns.RcodeSuccess,
			[]string{"A 203.0.113.10", "A 203.0.113.11"}, false},
		{"over TCP", q{name: "www.cdn.example.net.", qtype: dns.TypeA, tcp: true}, dns.RcodeSuccess,
			[]string{"A 203.0.113.10", "A 203.0.113.11"}, false},
		{"ANY", q{name: "www.cdn.example.net.", qtype: dns.TypeANY}, dns.RcodeSuccess,
			[]string{"A 203.0.113.10", "A 203.0.113.11", "AAAA 2001:db8::1"}, false},
		{"NODATA: no AAAA", q{name: "down.cdn.example.net.", qtype: dns.TypeAAAA}, dns.RcodeSuccess, nil, true},
		{"NODATA: no A", q{name: "v6.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeSuccess, nil, true},
		{"NODATA: other type", q{name: "www.cdn.example.net.", qtype: dns.TypeTXT}, dns.RcodeSuccess, nil, true},
		{"NODATA: empty non-terminal", q{name: "x.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeSuccess, nil, true},
		{"NODATA: level without origins, fail open", q{name: "empty.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeSuccess, nil, true},
		{"below an empty non-terminal", q{name: "deep.x.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeSuccess, []string{"A 203.0.113.40"}, false},
		{"CNAME for a hostname origin", q{name: "cname.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeSuccess,
			[]string{"CNAME backup.example.net."}, false},
		{"CNAME asked directly", q{name: "cname.cdn.example.net.", qtype: dns.TypeCNAME}, dns.RcodeSuccess,
			[]string{"CNAME backup.example.net."}, false},
		{"CNAME for any type", q{name: "cname.cdn.example.net.", qtype: dns.TypeTXT}, dns.RcodeSuccess,
			[]string{"CNAME backup.example.net."}, false},
		{"CNAME to the first healthy hostname origin", q{name: "hosts.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeSuccess,
			[]string{"CNAME b.example.net."}, false},
		{"mixed level: IP origins win", q{name: "mixed.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeSuccess, []string{"A 203.0.113.20"}, false},
		{"mixed level: no CNAME", q{name: "mixed.cdn.example.net.", qtype: dns.TypeCNAME}, dns.RcodeSuccess, nil, true},
		{"in-zone CNAME followed", q{name: "chase.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeSuccess,
			[]string{"A 203.0.113.10", "A 203.0.113.11", "CNAME www.cdn.example.net."}, false},
		{"fail open: every origin unhealthy", q{name: "down.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeSuccess,
			[]string{"A 203.0.113.30", "A 203.0.113.31"}, false},
		{"SOA at the apex", q{name: zone, qtype: dns.TypeSOA}, dns.RcodeSuccess, []string{soaData}, false},
		{"NS at the apex", q{name: "CDN.example.net.", qtype: dns.TypeNS}, dns.RcodeSuccess, []string{"NS ns1.cdn.example.net."}, false},
		{"NODATA: A at the apex", q{name: zone, qtype: dns.TypeA}, dns.RcodeSuccess, nil, true},
		{"NXDOMAIN", q{name: "nope.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeNameError, nil, true},
		{"NXDOMAIN below a site", q{name: "a.www.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeNameError, nil, true},
		{"NXDOMAIN for the name server without a site", q{name: "ns1.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeNameError, nil, true},
		{"REFUSED outside the zone", q{name: "outside.example.org.", qtype: dns.TypeA}, dns.RcodeRefused, nil, false},
		{"REFUSED for a look-alike suffix", q{name: "xcdn.example.net.", qtype: dns.TypeA}, dns.RcodeRefused, nil, false},
		{"REFUSED for the parent", q{name: "example.net.", qtype: dns.TypeSOA}, dns.RcodeRefused, nil, false},
		{"REFUSED for a zone transfer", q{name: zone, qtype: dns.TypeAXFR, tcp: true}, dns.RcodeRefused, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := exchange(t, s.Addr(), tt.q)
			if r.Rcode != tt.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tt.rcode])
			}
			if got := rdata(r.Answer); !slices.Equal(got, tt.answer) {
				t.Errorf("answer\n got %q\nwant %q", got, tt.answer)
			}
			var want []string
			if tt.soa {
				want = []string{soaData}
			}
			if got := rdata(r.Ns); !slices.Equal(got, want) {
				t.Errorf("authority\n got %q\nwant %q", got, want)
			}
			if inZone := tt.rcode != dns.RcodeRefused; r.Authoritative != inZone {
				t.Errorf("AA = %v, want %v", r.Authoritative, inZone)
			}
			if r.Truncated {
				t.Error("TC set on a small answer")
			}
			for _, rr := range r.Answer {
				if rr.Header().Ttl != 30 {
					t.Errorf("%s: ttl %d, want 30", rr, rr.Header().Ttl)
				}
			}
		})
	}
}

func TestFailClosed(t *testing.T) {
	tests := []struct {
		name   string
		q      q
		rcode  int
		answer []string
	}{
		{"every origin unhealthy: A", q{name: "down.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeServerFailure, nil},
		{"every origin unhealthy: AAAA", q{name: "down.cdn.example.net.", qtype: dns.TypeAAAA}, dns.RcodeServerFailure, nil},
		{"every origin unhealthy: ANY over TCP", q{name: "down.cdn.example.net.", qtype: dns.TypeANY, tcp: true}, dns.RcodeServerFailure, nil},
		{"level without origins", q{name: "empty.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeServerFailure, nil},
		{"non-address type still NODATA", q{name: "down.cdn.example.net.", qtype: dns.TypeTXT}, dns.RcodeSuccess, nil},
		{"healthy site unaffected", q{name: "www.cdn.example.net.", qtype: dns.TypeA}, dns.RcodeSuccess,
			[]string{"A 203.0.113.10", "A 203.0.113.11"}},
	}
	s, _ := startWith(t, true, fixture(7))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := exchange(t, s.Addr(), tt.q)
			if r.Rcode != tt.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tt.rcode])
			}
			if got := rdata(r.Answer); !slices.Equal(got, tt.answer) {
				t.Errorf("answer %q, want %q", got, tt.answer)
			}
		})
	}
}

// awaitAnswer queries until the answer is want, and returns how long that
// took. deadline is what it takes on a slow idle machine; the wait gives
// up at five times that, at least a minute: a hang guard, not a bound.
func awaitAnswer(t *testing.T, addr string, qq q, want []string, deadline time.Duration) time.Duration {
	t.Helper()
	deadline = max(5*deadline, time.Minute)
	begin := time.Now()
	var got []string
	for time.Since(begin) < deadline {
		r := exchange(t, addr, qq)
		got = rdata(r.Answer)
		if slices.Equal(got, want) {
			return time.Since(begin)
		}
	}
	t.Fatalf("%s %s still %q after %v, want %q", qq.name, dns.TypeToString[qq.qtype], got, deadline, want)
	return 0
}

func TestSwitchReflected(t *testing.T) {
	s, hub := startWith(t, false, fixture(7))
	www := q{name: "www.cdn.example.net.", qtype: dns.TypeA}
	apex := q{name: zone, qtype: dns.TypeSOA}
	awaitAnswer(t, s.Addr(), www, []string{"A 203.0.113.10", "A 203.0.113.11"}, 5*time.Second)

	steps := []struct {
		name    string
		version uint64
		origins []publication.Origin
		want    []string
	}{
		{"switch to level 2", 8, []publication.Origin{orig("backup", "https://192.0.2.1", "unknown")}, []string{"A 192.0.2.1"}},
		{"origin turns unhealthy", 9, []publication.Origin{
			orig("backup", "https://192.0.2.1", "unhealthy"), orig("backup2", "https://192.0.2.2", "healthy")}, []string{"A 192.0.2.2"}},
		{"switch back to hostname origin", 10, []publication.Origin{orig("cdn", "https://edge.example.com", "healthy")}, []string{"CNAME edge.example.com."}},
		{"serial wraps with the version", 1<<32 + 3, []publication.Origin{orig("p", "https://203.0.113.10", "healthy")}, []string{"A 203.0.113.10"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			snap := fixture(st.version)
			snap.Sites[0].Level = 2
			snap.Sites[0].Origins = st.origins
			published := time.Now()
			hub.Publish(snap)
			awaitAnswer(t, s.Addr(), www, st.want, 5*time.Second)
			// How fast: BenchmarkSwitchToAnswer.
			t.Logf("publish -> answer: %v", time.Since(published))
			soa := strings.Replace(soaData, " 7 ", fmt.Sprintf(" %d ", uint32(st.version)), 1)
			awaitAnswer(t, s.Addr(), apex, []string{soa}, time.Second)
			if v := s.Stats().Version; v != st.version {
				t.Errorf("Stats().Version = %d, want %d", v, st.version)
			}
		})
	}
}

func TestTruncation(t *testing.T) {
	s, _ := startWith(t, false, fixture(7))
	many := "many.cdn.example.net."
	tests := []struct {
		name      string
		q         q
		truncated bool
	}{
		{"UDP without EDNS", q{name: many, qtype: dns.TypeA}, true},
		{"UDP with a 512-byte EDNS buffer", q{name: many, qtype: dns.TypeA, edns: 512}, true},
		{"UDP with EDNS under 512 treated as 512", q{name: many, qtype: dns.TypeA, edns: 100}, true},
		{"UDP with a 4096-byte EDNS buffer", q{name: many, qtype: dns.TypeA, edns: 4096}, false},
		{"TCP", q{name: many, qtype: dns.TypeA, tcp: true}, false},
		{"TCP with EDNS", q{name: many, qtype: dns.TypeA, tcp: true, edns: 512}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := exchange(t, s.Addr(), tt.q)
			if r.Truncated != tt.truncated {
				t.Fatalf("TC = %v, want %v", r.Truncated, tt.truncated)
			}
			if tt.truncated {
				if len(r.Answer) >= 60 {
					t.Errorf("truncated answer holds all %d records", len(r.Answer))
				}
				r.Compress = true // Len of the wire form the server sent
				if size := max(int(tt.q.edns), dns.MinMsgSize); r.Len() > size {
					t.Errorf("answer is %d bytes, over the %d-byte buffer", r.Len(), size)
				}
			} else if len(r.Answer) != 60 {
				t.Errorf("answer holds %d records, want 60", len(r.Answer))
			}
			if hasOPT := r.IsEdns0() != nil; hasOPT != (tt.q.edns > 0) {
				t.Errorf("OPT in answer = %v, want %v", hasOPT, tt.q.edns > 0)
			}
		})
	}
	if s.Stats().Truncated != 3 {
		t.Errorf("Stats().Truncated = %d, want 3", s.Stats().Truncated)
	}
}

// header builds a raw 12-byte DNS header.
func header(id uint16, flags uint16, qd, an, ns, ar uint16) []byte {
	b := make([]byte, 0, 12)
	for _, v := range []uint16{id, flags, qd, an, ns, ar} {
		b = append(b, byte(v>>8), byte(v))
	}
	return b
}

// question is the wire form of www.cdn.example.net. with type and class.
func question(qtype, class uint16) []byte {
	b := []byte("\x03www\x03cdn\x07example\x03net\x00")
	return append(b, byte(qtype>>8), byte(qtype), byte(class>>8), byte(class))
}

func cat(bs ...[]byte) []byte { return slices.Concat(bs...) }

func TestMalformed(t *testing.T) {
	s, _ := startWith(t, false, fixture(7))
	const noReply = -1
	in := uint16(dns.ClassINET)
	opt := []byte{0, 0, 41, 0x10, 0, 0, 1, 0, 0, 0, 0} // OPT, 4096 bytes, EDNS version 1
	tests := []struct {
		name  string
		wire  []byte
		rcode int
	}{
		{"well-formed, for reference", cat(header(1, 0, 1, 0, 0, 0), question(dns.TypeA, in)), dns.RcodeSuccess},
		{"empty datagram", nil, noReply},
		{"shorter than a header", []byte{0, 1, 2}, noReply},
		{"no question", header(2, 0, 0, 0, 0, 0), dns.RcodeFormatError},
		{"two questions", cat(header(3, 0, 2, 0, 0, 0), question(dns.TypeA, in), question(dns.TypeA, in)), dns.RcodeFormatError},
		{"question count larger than the data", cat(header(4, 0, 1, 0, 0, 0), []byte{3, 'w'}), dns.RcodeFormatError},
		{"label pointer loop", cat(header(5, 0, 1, 0, 0, 0), []byte{0xc0, 12, 0, 1, 0, 1}), dns.RcodeFormatError},
		{"class CH", cat(header(6, 0, 1, 0, 0, 0), question(dns.TypeA, dns.ClassCHAOS)), dns.RcodeNotImplemented},
		{"opcode UPDATE", cat(header(7, 5<<11, 1, 0, 0, 0), question(dns.TypeSOA, in)), dns.RcodeNotImplemented},
		{"opcode NOTIFY", cat(header(8, 4<<11, 1, 0, 0, 0), question(dns.TypeSOA, in)), dns.RcodeNotImplemented},
		{"opcode STATUS", cat(header(9, 2<<11, 1, 0, 0, 0), question(dns.TypeA, in)), dns.RcodeNotImplemented},
		{"a response", cat(header(10, 1<<15, 1, 0, 0, 0), question(dns.TypeA, in)), noReply},
		{"EDNS version 1", cat(header(11, 0, 1, 0, 0, 1), question(dns.TypeA, in), opt), dns.RcodeBadVers},
		{"qtype OPT", cat(header(12, 0, 1, 0, 0, 0), question(dns.TypeOPT, in)), dns.RcodeFormatError},
		{"trailing garbage", cat(header(13, 0, 1, 0, 0, 0), question(dns.TypeA, in), []byte{0xff, 0xff, 0xff}), dns.RcodeSuccess},
	}
	conn, err := net.Dial("udp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := conn.Write(tt.wire); err != nil {
				t.Fatal(err)
			}
			// The well-formed reference query that follows proves the server
			// is alive, and that nothing was answered to a request that gets
			// no reply: answers come back in order on loopback.
			ref := cat(header(0xbeef, 0, 1, 0, 0, 0), question(dns.TypeA, in))
			if tt.rcode == noReply {
				if _, err := conn.Write(ref); err != nil {
					t.Fatal(err)
				}
			}
			buf := make([]byte, 4096)
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			r := new(dns.Msg)
			if err := r.Unpack(buf[:n]); err != nil {
				t.Fatalf("answer does not parse: %v", err)
			}
			if tt.rcode == noReply {
				if r.Id != 0xbeef {
					t.Fatalf("answered a request that should get no reply: %v", r)
				}
				return
			}
			if r.Rcode != tt.rcode {
				t.Errorf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tt.rcode])
			}
			if !r.Response {
				t.Error("QR bit not set")
			}
		})
	}
	t.Run("over TCP", func(t *testing.T) {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		msg := header(20, 0, 0, 0, 0, 0)
		if _, err := c.Write(append([]byte{0, byte(len(msg))}, msg...)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 2+512)
		n, err := c.Read(buf)
		if err != nil || n < 2+12 {
			t.Fatalf("read %d bytes: %v", n, err)
		}
		r := new(dns.Msg)
		if err := r.Unpack(buf[2:n]); err != nil || r.Rcode != dns.RcodeFormatError {
			t.Fatalf("answer %v (%v), want FORMERR", r, err)
		}
	})
	// Still serving after all that.
	if r := exchange(t, s.Addr(), q{name: "www.cdn.example.net.", qtype: dns.TypeA}); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("after malformed requests: rcode %s", dns.RcodeToString[r.Rcode])
	}
}

func TestEDNS(t *testing.T) {
	s, _ := startWith(t, false, fixture(7))
	r := exchange(t, s.Addr(), q{name: "www.cdn.example.net.", qtype: dns.TypeA, edns: 1400})
	opt := r.IsEdns0()
	if opt == nil {
		t.Fatal("no OPT record in the answer to an EDNS query")
	}
	if opt.Version() != 0 || opt.UDPSize() != advertisedUDPSize {
		t.Errorf("OPT version %d size %d, want 0 %d", opt.Version(), opt.UDPSize(), advertisedUDPSize)
	}
	if r := exchange(t, s.Addr(), q{name: "www.cdn.example.net.", qtype: dns.TypeA}); r.IsEdns0() != nil {
		t.Error("OPT record in the answer to a query without EDNS")
	}
}

func TestStatsAndCollector(t *testing.T) {
	s, _ := startWith(t, false, fixture(7))
	exchange(t, s.Addr(), q{name: "www.cdn.example.net.", qtype: dns.TypeA})
	exchange(t, s.Addr(), q{name: "www.cdn.example.net.", qtype: dns.TypeA, tcp: true})
	exchange(t, s.Addr(), q{name: "nope.cdn.example.net.", qtype: dns.TypeAAAA})
	exchange(t, s.Addr(), q{name: "example.org.", qtype: dns.TypeMX})
	st := s.Stats()
	want := map[QueryKey]uint64{
		{"A", "NOERROR"}: 2, {"AAAA", "NXDOMAIN"}: 1, {"other", "REFUSED"}: 1,
	}
	if fmt.Sprint(st.Queries) != fmt.Sprint(want) || st.Version != 7 {
		t.Errorf("Stats() = %v version %d, want %v version 7", st.Queries, st.Version, want)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for key, v := range map[string]float64{
		"vigil_dns_queries_total,rcode=NOERROR,type=A": 2,
		"vigil_dns_publication_version":                7,
		"vigil_dns_truncated_total":                    0,
	} {
		if got[key] != v {
			t.Errorf("%s = %v, want %v (all: %v)", key, got[key], v, got)
		}
	}
}

func TestLifecycle(t *testing.T) {
	t.Run("context end stops the server", func(t *testing.T) {
		hub := publish.NewHub()
		s, err := New(newConfig(false), hub, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		addr := s.Addr()
		cancel()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatal("TCP still accepting after Close")
		}
		if err := s.Start(context.Background()); err == nil {
			t.Fatal("Start after Close succeeded")
		}
	})
	t.Run("published between New and Start", func(t *testing.T) {
		hub := publish.NewHub()
		s, err := New(newConfig(false), hub, nil)
		if err != nil {
			t.Fatal(err)
		}
		hub.Publish(fixture(3))
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		awaitAnswer(t, s.Addr(), q{name: "v6.cdn.example.net.", qtype: dns.TypeAAAA}, []string{"AAAA 2001:db8::2"}, 5*time.Second)
	})
	t.Run("port in use", func(t *testing.T) {
		s1, _ := startWith(t, false, fixture(1))
		cfg := newConfig(false)
		cfg.Listen = s1.Addr()
		s2, err := New(cfg, publish.NewHub(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s2.Start(context.Background()); err == nil {
			s2.Close()
			t.Fatal("second server bound the same port")
		} else if !strings.Contains(err.Error(), s1.Addr()) {
			t.Errorf("error %q does not name the address", err)
		}
	})
}

func TestNewRejects(t *testing.T) {
	hub := publish.NewHub()
	tests := []struct {
		name string
		cfg  *config.DNSPublisher
		want string
	}{
		{"nil config", nil, "no configuration"},
		{"no listen", &config.DNSPublisher{Zone: zone}, "listen address is empty"},
		{"listen without port", &config.DNSPublisher{Listen: "127.0.0.1", Zone: zone}, "listen \"127.0.0.1\""},
		{"negative ttl", &config.DNSPublisher{Listen: "127.0.0.1:0", Zone: zone, TTL: -1}, "ttl -1"},
		{"no zone", &config.DNSPublisher{Listen: "127.0.0.1:0"}, "zone \"\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, hub, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
