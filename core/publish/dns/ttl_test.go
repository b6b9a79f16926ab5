package dns

import (
	"testing"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// TestTransitionTTL: a settled site's records have the ttl; a site failed
// over, ramping back, or with an origin down has the transition TTL, on
// the wire (fast path) and in zone transfers; the SOA keeps the ttl.
func TestTransitionTTL(t *testing.T) {
	settled := site("settled.cdn.example.net", orig("a", "https://203.0.113.1", "healthy"), orig("b", "https://203.0.113.2", "unknown"))
	failed := site("failed.cdn.example.net", orig("a", "https://198.51.100.1", "healthy"))
	failed.Level = 2
	ramping := rampSite(40, rampLevel, rampFrom)
	degraded := site("degraded.cdn.example.net", orig("a", "https://203.0.113.3", "healthy"), orig("b", "https://203.0.113.4", "unhealthy"))
	snap := &publication.Snapshot{Version: 4, Sites: []publication.Site{settled, failed, ramping, degraded}}

	hub := publish.NewHub()
	hub.Publish(snap)
	cfg := primaryConfig(t)
	cfg.TTL, cfg.TransitionTTL = 30, 15
	s, _ := startPrimary(t, cfg, hub)
	tests := []struct {
		name string
		ttl  uint32
	}{
		{"settled.cdn.example.net.", 30},
		{"failed.cdn.example.net.", 15},
		{"ramp.cdn.example.net.", 15},
		{"degraded.cdn.example.net.", 15},
	}
	rrs, err := transfer(s.Addr(), dns.TypeAXFR, 0, xfrKey, xfrSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, tcp := range []bool{false, true} {
				r := exchange(t, s.Addr(), q{name: tc.name, qtype: dns.TypeA, tcp: tcp})
				if len(r.Answer) == 0 {
					t.Fatalf("no answer")
				}
				for _, rr := range r.Answer {
					if rr.Header().Ttl != tc.ttl {
						t.Errorf("tcp %v: %v has TTL %d, want %d", tcp, rr, rr.Header().Ttl, tc.ttl)
					}
				}
			}
			seen := false
			for _, rr := range rrs {
				if rr.Header().Name == tc.name {
					seen = true
					if rr.Header().Ttl != tc.ttl {
						t.Errorf("transferred %v has TTL %d, want %d", rr, rr.Header().Ttl, tc.ttl)
					}
				}
			}
			if !seen {
				t.Error("not in the zone transfer")
			}
		})
	}
	if r := exchange(t, s.Addr(), q{name: zone, qtype: dns.TypeSOA}); r.Answer[0].Header().Ttl != 30 || r.Answer[0].(*dns.SOA).Minttl != 30 {
		t.Errorf("SOA %v: want TTL and minimum 30", r.Answer[0])
	}
}
