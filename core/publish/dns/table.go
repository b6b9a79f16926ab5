package dns

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"net/url"
	"strings"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// SOA timers by default (soa_refresh, soa_retry and soa_expire set them):
// they matter to the secondaries of a hidden primary; the negative-caching
// TTL (minimum) is the configured ttl, so an NXDOMAIN or NODATA is cached
// no longer than a positive answer.
const (
	soaRefresh = 3600
	soaRetry   = 600
	soaExpire  = 604800
	// maxChase bounds how many in-zone CNAME hops one answer follows.
	maxChase = 8
)

// node holds the precomputed records of one name in the zone. A node with
// no records is an empty non-terminal (or a site with nothing to publish):
// it answers NODATA, never NXDOMAIN.
type node struct {
	a, aaaa []dns.RR
	// cname is set when the site publishes a hostname origin; then a and
	// aaaa are empty.
	cname *dns.CNAME
	// servfail is set when fail_closed is on and every enabled origin of
	// the current level is unhealthy (or there is none).
	servfail bool
	// from, during a failback ramp, is the node of the level being left
	// (Ramp.FromOrigins, under the same rules and TTL): a query answers
	// from it unless its draw (0 to 99) is below weight, the ramp's per
	// cent for the current level. weight is 0 when the current level has
	// nothing to publish: from then answers every query.
	from   *node
	weight int
}

// publishes reports whether n answers address questions with records.
func (n *node) publishes() bool {
	return !n.servfail && (n.cname != nil || len(n.a)+len(n.aaaa) > 0)
}

// Sides of a ramp a question is answered from.
const (
	sideDraw  = iota // a random draw per query
	sideLevel        // the current level (unless it has nothing)
	sideFrom         // the level being left
)

// ramps is what resolve met of ramps: how many ramping nodes, and the
// weight of the last.
type ramps struct{ n, weight int }

// table is one immutable answer table, built from one publication
// snapshot. It is swapped atomically; queries never see a half-built one.
type table struct {
	version uint64
	zone    string
	soa     []dns.RR // the apex SOA, alone: the authority section of NXDOMAIN and NODATA
	ns      []dns.RR
	// glue are the in-zone name servers' A and AAAA records, the
	// additional section of the apex's NS answer.
	glue  []dns.RR
	names map[string]*node
	// packed caches the packed UDP answers of the fast path (fast.go).
	packed answerCache
}

// settings are the parts of the configuration the table depends on.
type settings struct {
	zone string // lower case, fully qualified
	ttl  uint32
	ns   []string // fully qualified
	// nsAddrs are the addresses of in-zone name servers, by name.
	nsAddrs    map[string][]netip.Addr
	failClosed bool
	// rname is the SOA's mailbox ("" is hostmaster.<zone>); refresh,
	// retry and expire its timers (0 is the default).
	rname                  string
	refresh, retry, expire uint32
	// transitionTTL is the TTL of a site's records while it is in
	// transition (inTransition): resolvers come back sooner for the next
	// move.
	transitionTTL uint32
}

// inTransition reports whether a site is not settled: failed over (its
// level is not level 1), ramping back, or with an origin of its current
// level confirmed down. Its records get the transition TTL.
func inTransition(site *publication.Site) bool {
	if site.Ramp != nil || site.Level > 1 {
		return true
	}
	for _, o := range site.Origins {
		if o.State == "unhealthy" {
			return true
		}
	}
	return false
}

// inZone reports whether the lower-case fully qualified name is the zone
// apex or below it, label by label: an escaped dot (www\.cdn.example.net.
// is the label "www.cdn" under example.net.) does not end a label.
func inZone(name, zone string) bool {
	if zone == "." {
		return true
	}
	if !strings.HasSuffix(name, zone) {
		return false
	}
	if len(name) == len(zone) {
		return true
	}
	if name[len(name)-len(zone)-1] != '.' {
		return false
	}
	// The dot before the zone ends a label unless it is escaped, i.e.
	// preceded by an odd number of backslashes.
	bs := 0
	for i := len(name) - len(zone) - 2; i >= 0 && name[i] == '\\'; i-- {
		bs++
	}
	return bs%2 == 0
}

// origin is one origin reduced to what DNS can publish: an address or a
// host name. The URL's scheme and port are not publishable and dropped.
type origin struct {
	addr    netip.Addr // valid for IP-literal origins
	host    string     // fully qualified, for hostname origins
	healthy bool
	down    bool // state "unhealthy"
}

func parseOrigin(o publication.Origin) (origin, error) {
	raw := o.Address
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return origin{}, fmt.Errorf("address %q: %w", o.Address, err)
	}
	h := u.Hostname()
	if h == "" {
		return origin{}, fmt.Errorf("address %q has no host", o.Address)
	}
	r := origin{healthy: o.State == "healthy", down: o.State == "unhealthy"}
	if a, err := netip.ParseAddr(h); err == nil {
		r.addr = a.WithZone("").Unmap()
		return r, nil
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if _, ok := dns.IsDomainName(h); !ok {
		return origin{}, fmt.Errorf("address %q: %q is neither an IP address nor a host name", o.Address, h)
	}
	r.host = dns.Fqdn(h)
	return r, nil
}

// build turns a snapshot into an answer table. It is pure; problems that
// leave something unpublished come back as notes for the log.
func build(st settings, snap *publication.Snapshot) (*table, []string) {
	var notes []string
	t := &table{version: snap.Version, zone: st.zone, names: make(map[string]*node)}
	hdr := func(name string, rrtype uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: st.ttl}
	}
	mname, mbox := st.zone, "hostmaster."+st.zone
	if st.zone == "." {
		mbox = "hostmaster."
	}
	if len(st.ns) > 0 {
		mname = st.ns[0]
	}
	if st.rname != "" {
		mbox = st.rname
	}
	or := func(v, def uint32) uint32 {
		if v == 0 {
			return def
		}
		return v
	}
	t.soa = []dns.RR{&dns.SOA{
		Hdr:     hdr(st.zone, dns.TypeSOA),
		Ns:      mname,
		Mbox:    mbox,
		Serial:  uint32(snap.Version), // RFC 1982 arithmetic copes with the wrap
		Refresh: or(st.refresh, soaRefresh),
		Retry:   or(st.retry, soaRetry),
		Expire:  or(st.expire, soaExpire),
		Minttl:  st.ttl,
	}}
	for _, n := range st.ns {
		t.ns = append(t.ns, &dns.NS{Hdr: hdr(st.zone, dns.TypeNS), Ns: n})
	}
	t.names[st.zone] = &node{}
	for _, n := range st.ns {
		addrs := st.nsAddrs[n]
		if len(addrs) == 0 || !inZone(n, st.zone) {
			continue
		}
		nn := &node{}
		for _, a := range addrs {
			if a.Is4() {
				nn.a = append(nn.a, &dns.A{Hdr: hdr(n, dns.TypeA), A: a.AsSlice()})
			} else {
				nn.aaaa = append(nn.aaaa, &dns.AAAA{Hdr: hdr(n, dns.TypeAAAA), AAAA: a.AsSlice()})
			}
		}
		t.glue = append(append(t.glue, nn.a...), nn.aaaa...)
		if n != st.zone {
			t.names[n] = nn
		}
	}

	published := make(map[string]string) // hostname -> site name
	for i := range snap.Sites {
		site := &snap.Sites[i]
		name := dns.Fqdn(strings.ToLower(strings.TrimSuffix(site.Hostname, ".")))
		if site.Hostname == "" || !inZone(name, st.zone) {
			continue // not published through this zone
		}
		if other, ok := published[name]; ok {
			notes = append(notes, fmt.Sprintf("site %q: hostname %s is already published by site %q; skipped", site.Name, name, other))
			continue
		}
		if len(st.nsAddrs[name]) > 0 {
			notes = append(notes, fmt.Sprintf("site %q: hostname %s is a name server of the zone with ns_addresses; skipped", site.Name, name))
			continue
		}
		published[name] = site.Name
		sst := st
		if inTransition(site) {
			sst.ttl = st.transitionTTL
		}
		n, siteNotes := siteNode(sst, name, site)
		for _, s := range siteNotes {
			notes = append(notes, fmt.Sprintf("site %q: %s", site.Name, s))
		}
		if r := site.Ramp; r != nil && r.Weight > 0 && r.Weight < 100 {
			fromSite := publication.Site{Name: site.Name, Hostname: site.Hostname, Level: r.From, Origins: r.FromOrigins}
			from, fromNotes := siteNode(sst, name, &fromSite)
			for _, s := range fromNotes {
				notes = append(notes, fmt.Sprintf("site %q, ramp from level %d: %s", site.Name, r.From, s))
			}
			if from.publishes() {
				n.from, n.weight = from, r.Weight
				if !n.publishes() {
					n.weight = 0
				}
			}
		}
		t.names[name] = n
	}
	// Every name between a site and the apex exists (an empty
	// non-terminal): it answers NODATA, not NXDOMAIN (RFC 8020).
	for name := range t.names {
		for p := name; p != st.zone; {
			i := strings.IndexByte(p, '.')
			if i < 0 || i == len(p)-1 {
				break
			}
			p = p[i+1:]
			if _, ok := t.names[p]; !ok {
				t.names[p] = &node{}
			}
		}
	}
	return t, notes
}

// siteNode applies the publication rules to one site's current level:
//
//   - origins whose address cannot be published are left out first;
//   - the chosen set is the origins not unhealthy; when that is empty it
//     is every origin (fail open), or SERVFAIL with fail_closed;
//   - the IP origins of the chosen set give A and AAAA records; hostname
//     origins give a CNAME only when the chosen set has no IP origin, to
//     the first healthy one (else the first), since a CNAME cannot stand
//     beside other records.
func siteNode(st settings, name string, site *publication.Site) (*node, []string) {
	var notes []string
	var all []origin
	for _, o := range site.Origins {
		p, err := parseOrigin(o)
		if err != nil {
			notes = append(notes, fmt.Sprintf("origin %q: %v; not published", o.Name, err))
			continue
		}
		if p.host == name {
			notes = append(notes, fmt.Sprintf("origin %q: address names the site itself; not published", o.Name))
			continue
		}
		all = append(all, p)
	}
	var chosen []origin
	for _, o := range all {
		if !o.down {
			chosen = append(chosen, o)
		}
	}
	if len(chosen) == 0 {
		if st.failClosed {
			return &node{servfail: true}, notes
		}
		chosen = all // fail open
	}
	n := &node{}
	var target string
	var targetHealthy bool
	for _, o := range chosen {
		switch {
		case o.addr.Is4():
			n.a = append(n.a, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: st.ttl}, A: o.addr.AsSlice()})
		case o.addr.Is6():
			n.aaaa = append(n.aaaa, &dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: st.ttl}, AAAA: o.addr.AsSlice()})
		case target == "" || (o.healthy && !targetHealthy):
			target, targetHealthy = o.host, o.healthy
		}
	}
	if len(n.a)+len(n.aaaa) == 0 && target != "" {
		if name == st.zone {
			notes = append(notes, "a CNAME cannot stand at the zone apex; hostname origins not published")
		} else {
			n.cname = &dns.CNAME{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: st.ttl}, Target: target}
		}
	}
	return n, notes
}

// resolve fills the answer and authority sections and the rcode of m for
// the question (name lower-case and fully qualified, class IN), from side
// of the ramps it meets, and says what ramps it met.
func (t *table) resolve(m *dns.Msg, name string, qtype uint16, side int) (r ramps) {
	if !inZone(name, t.zone) {
		m.Rcode = dns.RcodeRefused
		return
	}
	m.Authoritative = true
	n := t.names[name]
	if n == nil {
		m.Rcode = dns.RcodeNameError
		m.Ns = t.soa
		return
	}
	draw := -1 // drawn when a ramp is met
	switch side {
	case sideLevel:
		draw = 0
	case sideFrom:
		draw = 99
	}
	n = n.side(&draw, &r)
	address := qtype == dns.TypeA || qtype == dns.TypeAAAA || qtype == dns.TypeANY || qtype == dns.TypeCNAME
	if n.servfail && address {
		m.Rcode = dns.RcodeServerFailure
		return
	}
	apex := name == t.zone
	switch {
	case apex && qtype == dns.TypeSOA:
		m.Answer = t.soa
	case apex && qtype == dns.TypeNS:
		m.Answer = t.ns
		m.Extra = t.glue
	case n.cname != nil:
		m.Answer = t.chase(n.cname, qtype, &draw, &r)
	case qtype == dns.TypeA:
		m.Answer = n.a
	case qtype == dns.TypeAAAA:
		m.Answer = n.aaaa
	case qtype == dns.TypeANY:
		var all []dns.RR
		if apex {
			all = append(append(all, t.soa...), t.ns...)
		}
		m.Answer = append(append(all, n.a...), n.aaaa...)
	}
	if len(m.Answer) == 0 {
		m.Ns = t.soa // NODATA
	}
	return r
}

// side returns the node answering a query of draw (0 to 99, or -1 for a
// random one, drawn here when needed): n, or the node of the level its
// ramp is leaving; r counts the ramp.
func (n *node) side(draw *int, r *ramps) *node {
	if n.from == nil {
		return n
	}
	r.n++
	r.weight = n.weight
	if *draw < 0 {
		*draw = rand.IntN(100)
	}
	if *draw >= n.weight {
		return n.from
	}
	return n
}

// chase returns the CNAME and, for an address question, the records of
// its target when the target is a name of this table, following at most
// maxChase hops. A target outside the table is left to the resolver.
func (t *table) chase(c *dns.CNAME, qtype uint16, draw *int, r *ramps) []dns.RR {
	ans := []dns.RR{c}
	if qtype == dns.TypeCNAME {
		return ans
	}
	for range maxChase {
		n := t.names[c.Target]
		if n == nil {
			return ans
		}
		if n = n.side(draw, r); n.servfail {
			return ans
		}
		if n.cname != nil {
			c = n.cname
			ans = append(ans, c)
			continue
		}
		switch qtype {
		case dns.TypeA:
			ans = append(ans, n.a...)
		case dns.TypeAAAA:
			ans = append(ans, n.aaaa...)
		case dns.TypeANY:
			ans = append(append(ans, n.a...), n.aaaa...)
		}
		return ans
	}
	return ans
}
