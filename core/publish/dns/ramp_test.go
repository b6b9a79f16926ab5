package dns

import (
	"math"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// rampSite is ramp.cdn.example.net at level 1 (203.0.113.60) ramping back
// from level 2 (203.0.113.70) with weight.
func rampSite(weight int, level, from []publication.Origin) publication.Site {
	s := site("ramp.cdn.example.net", level...)
	s.Ramp = &publication.Ramp{Weight: weight, From: 2, FromOrigins: from}
	return s
}

var (
	rampLevel = []publication.Origin{orig("l1", "https://203.0.113.60", "healthy")}
	rampFrom  = []publication.Origin{orig("f1", "https://203.0.113.70", "healthy")}
)

// TestRampShare: over many queries, Weight per cent of the answers carry
// the current level's addresses and the rest the level being left's, with
// the same TTL, on the UDP fast path (whose cache keeps both answers and
// draws per query), over TCP and with the fast path off. A draw is random
// per query: the tolerance is over 4 standard deviations.
func TestRampShare(t *testing.T) {
	snap := &publication.Snapshot{Version: 3, Format: publication.FormatRamp, Sites: []publication.Site{
		rampSite(25, rampLevel, rampFrom),
		site("www.cdn.example.net", orig("a", "https://203.0.113.10", "healthy")),
	}}
	fast, _ := startWith(t, false, snap)
	for _, tt := range []struct {
		name string
		addr string
		q    q
		n    int
	}{
		{"udp fast path", fast.Addr(), q{name: "ramp.cdn.example.net.", qtype: dns.TypeA}, 4000},
		{"udp fast path, edns", fast.Addr(), q{name: "ramp.cdn.example.net.", qtype: dns.TypeA, edns: 1232}, 4000},
		{"tcp", fast.Addr(), q{name: "ramp.cdn.example.net.", qtype: dns.TypeA, tcp: true}, 1500},
	} {
		t.Run(tt.name, func(t *testing.T) {
			count := map[string]int{}
			for range tt.n {
				r := exchange(t, tt.addr, tt.q)
				if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 30 {
					t.Fatalf("answer %v, want one record of TTL 30", r.Answer)
				}
				count[rdata(r.Answer)[0]]++
			}
			share := float64(count["A 203.0.113.60"]) / float64(tt.n)
			tol := 4.5 * math.Sqrt(0.25*0.75/float64(tt.n))
			t.Logf("%d queries: %v: the current level's share %.4f (want 0.25 ± %.3f)", tt.n, count, share, tol)
			if count["A 203.0.113.60"]+count["A 203.0.113.70"] != tt.n {
				t.Fatalf("answers %v", count)
			}
			if math.Abs(share-0.25) > tol {
				t.Errorf("share %.4f, want 0.25 ± %.3f", share, tol)
			}
		})
	}
	// The fast path's cache holds the ramping answer with both levels'.
	split := 0
	c := &fast.table.Load().packed
	for i := range c.shards {
		c.shards[i].mu.RLock()
		for _, a := range c.shards[i].m {
			if a.alt != nil && a.weight == 25 {
				split++
			}
		}
		c.shards[i].mu.RUnlock()
	}
	if split != 2 {
		t.Errorf("%d cached answers with both levels, want 2 (with and without EDNS)", split)
	}
	// A site without a ramp is answered from the cache as before.
	for range 50 {
		if got := rdata(exchange(t, fast.Addr(), q{name: "www.cdn.example.net.", qtype: dns.TypeA}).Answer); !slices.Equal(got, []string{"A 203.0.113.10"}) {
			t.Fatalf("www: %v", got)
		}
	}
}

// TestRampTable: which node answers each side, and the ramps that do not
// split: a weight out of 1..99, a level being left with nothing to
// publish (the current level answers), a current level with nothing (the
// level being left answers all).
func TestRampTable(t *testing.T) {
	answer := func(s publication.Site, side int) ([]string, ramps) {
		tb, _ := build(testSettings, &publication.Snapshot{Version: 1, Sites: []publication.Site{s}})
		m := new(dns.Msg)
		r := tb.resolve(m, "ramp.cdn.example.net.", dns.TypeA, side)
		return rdata(m.Answer), r
	}
	lvl, from := []string{"A 203.0.113.60"}, []string{"A 203.0.113.70"}
	for _, tt := range []struct {
		name        string
		s           publication.Site
		level, left []string // the answers of sideLevel and sideFrom
		n           int
	}{
		{"ramp", rampSite(25, rampLevel, rampFrom), lvl, from, 1},
		{"weight 100", rampSite(100, rampLevel, rampFrom), lvl, lvl, 0},
		{"weight 0", rampSite(0, rampLevel, rampFrom), lvl, lvl, 0},
		{"nothing to leave to", rampSite(25, rampLevel, []publication.Origin{orig("x", "ftp://", "healthy")}), lvl, lvl, 0},
		{"current level has nothing", rampSite(25, nil, rampFrom), from, from, 1},
		{"current level down, fail open", rampSite(25, []publication.Origin{orig("l1", "https://203.0.113.60", "unhealthy")}, rampFrom), lvl, from, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gotL, r := answer(tt.s, sideLevel)
			gotF, _ := answer(tt.s, sideFrom)
			if !slices.Equal(gotL, tt.level) || !slices.Equal(gotF, tt.left) || r.n != tt.n {
				t.Errorf("level side %v, from side %v, ramps %d; want %v, %v, %d", gotL, gotF, r.n, tt.level, tt.left, tt.n)
			}
		})
	}
}
