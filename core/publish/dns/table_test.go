package dns

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/sdk/publication"
)

var testSettings = settings{zone: zone, ttl: 30, ns: []string{"ns1.cdn.example.net."}}

func TestBuildNotes(t *testing.T) {
	snap := &publication.Snapshot{Version: 1, Sites: []publication.Site{
		site("a.cdn.example.net", orig("bad", "https://exa mple.net", "healthy"), orig("ok", "https://192.0.2.1", "healthy")),
		site("A.cdn.example.net.", orig("dup", "https://192.0.2.2", "healthy")),
		site("self.cdn.example.net", orig("loop", "https://self.cdn.example.net", "healthy")),
		site("cdn.example.net", orig("host", "https://apex-origin.example.com", "healthy")),
	}}
	tb, notes := build(testSettings, snap)
	want := []string{
		`site "a": origin "bad": address "https://exa mple.net"`,
		`site "A": hostname a.cdn.example.net. is already published by site "a"; skipped`,
		`site "self": origin "loop": address names the site itself; not published`,
		`site "cdn": a CNAME cannot stand at the zone apex; hostname origins not published`,
	}
	if len(notes) != len(want) {
		t.Fatalf("notes %q, want %d", notes, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(notes[i], want[i]) {
			t.Errorf("note %d: %q, want prefix %q", i, notes[i], want[i])
		}
	}
	if got := rdata(tb.names["a.cdn.example.net."].a); !slices.Equal(got, []string{"A 192.0.2.1"}) {
		t.Errorf("site a: %q, want the first site's parseable origin only", got)
	}
	if n := tb.names[zone]; n.cname != nil || len(n.a)+len(n.aaaa) > 0 {
		t.Errorf("apex node %+v, want no records", n)
	}
}

func TestParseOrigin(t *testing.T) {
	tests := []struct {
		addr string
		want string // "ip X", "host X" or "error"
	}{
		{"https://203.0.113.10:8443", "ip 203.0.113.10"},
		{"http://[2001:DB8::1]:80", "ip 2001:db8::1"},
		{"https://[fe80::1%25eth0]", "ip fe80::1"},
		{"https://[::ffff:192.0.2.7]", "ip 192.0.2.7"},
		{"203.0.113.10:443", "ip 203.0.113.10"},
		{"https://Backup.Example.NET.", "host backup.example.net."},
		{"origin.example.net", "host origin.example.net."},
		{"https://", "error"},
		{"://x", "error"},
		{"https://a..b", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			o, err := parseOrigin(orig("o", tt.addr, "healthy"))
			got := "error"
			switch {
			case err != nil:
			case o.addr.IsValid():
				got = "ip " + o.addr.String()
			default:
				got = "host " + o.host
			}
			if got != tt.want {
				t.Fatalf("parseOrigin(%q) = %s (%v), want %s", tt.addr, got, err, tt.want)
			}
		})
	}
}

// FuzzParseOrigin feeds arbitrary origin addresses through the table
// build and an answer: never a panic, and every answer packs.
func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{"https://203.0.113.10:8443", "http://[2001:db8::1]", "backup.example.net", "https://x.cdn.example.net", "", "%", "https://[::1%25x]"} {
		f.Add(s, "healthy")
	}
	f.Fuzz(func(t *testing.T, addr, state string) {
		snap := &publication.Snapshot{Version: 1, Sites: []publication.Site{
			site("x.cdn.example.net", orig("o", addr, state)),
			site("y.cdn.example.net", orig("o", addr, "unhealthy"), orig("p", "https://192.0.2.1", state)),
		}}
		tb, _ := build(testSettings, snap)
		for _, name := range []string{"x.cdn.example.net.", "y.cdn.example.net."} {
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeANY, dns.TypeCNAME} {
				m := new(dns.Msg)
				m.SetQuestion(name, qt)
				tb.resolve(m, name, qt, sideDraw)
				if _, err := m.Pack(); err != nil {
					t.Fatalf("%s %s for address %q: answer does not pack: %v", name, dns.TypeToString[qt], addr, err)
				}
			}
		}
	})
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{100, 5000} {
		b.Run(fmt.Sprint(n, "sites"), func(b *testing.B) {
			snap := bigSnapshot(1, n)
			for b.Loop() {
				build(testSettings, snap)
			}
		})
	}
}

// bigSnapshot has n sites of three origins each, one of them unhealthy.
func bigSnapshot(version uint64, n int) *publication.Snapshot {
	snap := &publication.Snapshot{Version: version}
	for i := range n {
		snap.Sites = append(snap.Sites, site(fmt.Sprintf("s%d.cdn.example.net", i),
			orig("a", fmt.Sprintf("https://10.%d.%d.1", i>>8&255, i&255), "healthy"),
			orig("b", fmt.Sprintf("https://10.%d.%d.2", i>>8&255, i&255), "unknown"),
			orig("c", fmt.Sprintf("https://[2001:db8::%x]", i), "unhealthy")))
	}
	return snap
}
