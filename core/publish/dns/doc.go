// Package dns is vigil's authoritative DNS server: it publishes each site's
// current level through DNS, handing out only origins that are not
// confirmed down. It is built on github.com/miekg/dns and started by
// `vigil agent` from the `publish "dns"` block.
//
// # Answers
//
// The server answers for the configured zone only; a question outside it
// gets REFUSED. Names are compared label by label: www\.cdn.example.net.
// (one label "www.cdn" under example.net.) is outside cdn.example.net.
// Inside the zone:
//
//   - the name servers of ns that lie inside the zone have the A and AAAA
//     records ns_addresses gives them, also sent as glue in the additional
//     section of the apex's NS answer (without ns_addresses such a name
//     server answers NXDOMAIN, and the agent warns at load);
//   - the apex has the SOA and the NS records; the SOA serial is the
//     publication version (its low 32 bits; serial arithmetic copes with the
//     wrap), so a switch also shows as a new serial;
//   - a site whose hostname is in the zone has A records for the IPv4
//     origins and AAAA records for the IPv6 origins of its current level
//     that are not unhealthy ("healthy" and "unknown" are answered). The
//     origin URL's scheme and port are not publishable and are dropped;
//   - when every enabled origin of the current level is unhealthy, or the
//     level has none, the site fails open: every enabled origin is answered
//     (nothing, hence NODATA, when there is none). With fail_closed the
//     address questions (A, AAAA, CNAME, ANY) get SERVFAIL instead;
//   - origins addressed by hostname: a CNAME cannot stand beside other
//     records, so the rule is that IP origins win. When the chosen set
//     (after the health and fail-open rules above) holds any IP origin, only
//     the IP origins are answered and the hostname origins are left out.
//     When it holds only hostname origins, the site is a CNAME to one of
//     them: the first healthy one in publication order, else the first. A
//     CNAME whose target is another name of the zone is followed (at most 8
//     hops) for A, AAAA and ANY questions. A site at the zone apex never
//     gets a CNAME;
//   - a name with no record of the asked type gets NOERROR with no answer
//     and the SOA in the authority section (NODATA); so do the names
//     between a site and the apex (empty non-terminals, RFC 8020);
//   - any other name in the zone gets NXDOMAIN with the SOA;
//   - zone transfers (AXFR, IXFR) get REFUSED, unless the client is in
//     allow_transfer (see Hidden primary below).
//
// # Failback ramps
//
// A site carrying a Ramp (a failback in progress, publication format 2)
// is answered from its current level with probability Ramp.Weight per
// cent, and from the level it is leaving (Ramp.FromOrigins) otherwise: a
// random draw per query, under the same rules (health, fail-open or
// fail_closed, CNAME) and the same ttl for both levels. A weight out of 1
// to 99, or a level being left with nothing to publish, answers from the
// current level alone; a current level with nothing to publish (no usable
// origin, or SERVFAIL with fail_closed) answers from the level being left
// alone. The UDP fast path keeps both answers of a ramping question in its
// cache and draws per query which one it sends (fast.go).
//
// A settled site's records have the configured ttl; a site that moves
// (failed over: its level is not 1; ramping back; or with an origin of its
// current level unhealthy) has transition_ttl (half of ttl by default), so
// that resolvers come back sooner (table.go, inTransition). The SOA has
// the ttl, and so has its minimum (the negative-caching TTL); its rname
// and timers are configurable. Names are matched without regard to case.
//
// # Hidden primary
//
// With allow_transfer, the server is the primary of the operator's own
// secondaries (xfr.go): AXFR over TCP, and IXFR answered from the zones of
// the last 32 publications (a condensed difference; the whole zone for a
// serial no longer kept; the SOA alone when up to date or over UDP). With
// tsig_key, transfers must be signed with that key (the secret comes from
// the environment variable tsig_secret_env names), signed queries get
// signed answers, and a bad signature gets NOTAUTH. Every publication that
// changes the zone's records, and the start, sends NOTIFY to the
// addresses of notify, retried with backoff. A ramping site is
// transferred with the level it ramps to.
//
// # Response rate limiting
//
// UDP answers to one client network (a /24, a /56) are limited to
// rrl_rate per second; past it every rrl_slip-th is sent empty with the TC
// bit and the rest dropped (rrl.go). TCP is never limited; rrl_exempt
// networks (loopback by default) neither. The fast path's read loop counts
// every UDP query, for both paths.
//
// # Dynamic updates
//
// Updater (update.go) is the publish "dns_update" block: it pushes each
// site's addresses, under the same rules, into a zone the operator's
// primary serves, with RFC 2136 UPDATEs signed with TSIG, the records it
// last wrote as prerequisites.
//
// # Transport and malformed requests
//
// The server listens on UDP and TCP on the same port. Plain UDP queries
// are answered by a fast path inside the read loop, from the packed answers
// of the normal path (fast.go), reading up to 32 queries with one recvmmsg
// and sending their answers with one sendmmsg (batch.go; one message per
// call on other systems than Linux); every other query goes through
// github.com/miekg/dns as before. On a wildcard listen address (0.0.0.0,
// ::) each answer leaves from the address its query was sent to, on both
// paths (as the library does; not on Windows and macOS, where it does not
// either). It speaks EDNS0:
// a UDP answer is sized to the client's advertised buffer (at least 512,
// at most 4096 bytes), to 512 bytes without EDNS0, and gets the TC bit
// when records had to be left out; TCP answers are complete. Names are
// always compressed (RFC 1035 4.1.4). A request
// with no question or several questions, or with more than one OPT record
// (RFC 6891 6.1.1), gets FORMERR, an opcode other than
// QUERY or a class other than IN gets NOTIMP, an EDNS version other than 0
// gets BADVERS; a request the library cannot parse gets FORMERR, and one
// too short for a header gets nothing.
//
// # Following the publication
//
// Nothing polls. The answers live in an immutable table rebuilt from each
// publication snapshot and swapped atomically; a goroutine loops on
// publish.Hub.Wait, so a switch shows in the answers as soon as the table
// is rebuilt (about 2 µs per site: some 10 ms for 5000 sites).
//
// # Metrics
//
// Stats returns the counters; Collector exposes them to Prometheus as
// vigil_dns_queries_total{type,rcode}, vigil_dns_truncated_total,
// vigil_dns_publication_version, vigil_dns_transfers_total{result},
// vigil_dns_notify_total{result} and vigil_dns_rrl_limited_total{action}.
// The Updater's Collector gives vigil_dns_update_total{result} and
// vigil_dns_update_failing{name}.
//
// # Checks against other servers
//
// BenchmarkDNSCompare (compare_test.go) sends the same UDP load to this
// server, to the same server without its fast path, and to NSD and Knot DNS
// serving the same zone (each skipped when not installed), every one in a
// process of its own (VIGIL_BENCH_IN_PROCESS=1 adds vigil's two inside the
// benchmark's process too), and reports the ratios of their queries per
// second, measured in one run, and each server's CPU time per query (from
// /proc, steadier on shared cores; VIGIL_BENCH_CPUPROFILE=DIR profiles
// vigil's server processes). TestZonemaster
// (zonemaster_test.go) runs Zonemaster (zonemaster-cli, installed by make
// deps) against two of these servers on loopback port 53: every test case
// of its default profile that needs nothing but the zone's own name servers
// (all but the Address module and connectivity03), failing on any ERROR,
// CRITICAL or WARNING that is not due to testing on loopback.
//
// # Configuration
//
//	publish "dns" {
//	  listen      = "127.0.0.1:5353"
//	  zone        = "cdn.example.net."
//	  ttl         = 30
//	  ns          = ["ns1.cdn.example.net."]
//	  ns_addresses = { "ns1.cdn.example.net." = ["192.0.2.53"] }
//	  fail_closed = false
//	}
//
// docs/dns.md shows the three ways to publish (serve, hidden primary,
// dynamic update) with worked examples and the measured propagation
// times. Without ns the apex has no NS records and the SOA names the zone
// apex as its primary server. Keep ttl at or below the sites' detection time
// (unhealthy_threshold x round_interval); the loader warns otherwise.
package dns
