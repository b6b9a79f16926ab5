package dns

import (
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Query types and rcodes are counted in fixed buckets so that counting is
// one atomic add, whatever a client sends.
var (
	typeLabels  = [...]string{"A", "AAAA", "CNAME", "NS", "SOA", "ANY", "other", "none"}
	rcodeLabels = [...]string{"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "BADVERS", "other"}
)

// typeNone is the bucket of requests rejected before their question was
// read.
const typeNone = len(typeLabels) - 1

func typeIndex(t uint16) int {
	switch t {
	case dns.TypeA:
		return 0
	case dns.TypeAAAA:
		return 1
	case dns.TypeCNAME:
		return 2
	case dns.TypeNS:
		return 3
	case dns.TypeSOA:
		return 4
	case dns.TypeANY:
		return 5
	}
	return 6
}

func rcodeIndex(rc int) int {
	switch {
	case rc >= 0 && rc <= dns.RcodeRefused:
		return rc
	case rc == dns.RcodeBadVers:
		return 6
	}
	return 7
}

type counters struct {
	queries   [len(typeLabels)][len(rcodeLabels)]atomic.Uint64
	truncated atomic.Uint64
	// The hidden primary: transfers served and refused, NOTIFY sent and
	// given up on.
	xfrServed, xfrRefused, notifySent, notifyFailed atomic.Uint64
}

func (c *counters) count(qtype, rcode int) { c.queries[qtype][rcode].Add(1) }

// QueryKey is one cell of the query counters.
type QueryKey struct {
	// Type is "A", "AAAA", "CNAME", "NS", "SOA", "ANY", "other", or "none"
	// for a request rejected before its question was read.
	Type string
	// Rcode is "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP",
	// "REFUSED", "BADVERS" or "other".
	Rcode string
}

// Stats is a copy of the server's counters.
type Stats struct {
	// Queries counts answered requests by question type and rcode; cells
	// at zero are left out. A request the DNS library could not parse at
	// all is answered FORMERR by the library and not counted.
	Queries map[QueryKey]uint64
	// Truncated counts UDP answers sent with the TC bit.
	Truncated uint64
	// Version is the publication version the answers follow (the SOA
	// serial is its low 32 bits).
	Version uint64
	// TransfersServed and TransfersRefused count zone transfers (AXFR,
	// IXFR); NotifySent and NotifyFailed count NOTIFY messages answered
	// by a secondary and given up on after the retries.
	TransfersServed, TransfersRefused, NotifySent, NotifyFailed uint64
	// RRLDropped and RRLSlipped count the UDP answers response rate
	// limiting dropped, and those it sent empty and truncated.
	RRLDropped, RRLSlipped uint64
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	st := Stats{Queries: make(map[QueryKey]uint64), Truncated: s.counters.truncated.Load(), Version: s.table.Load().version,
		TransfersServed: s.counters.xfrServed.Load(), TransfersRefused: s.counters.xfrRefused.Load(),
		NotifySent: s.counters.notifySent.Load(), NotifyFailed: s.counters.notifyFailed.Load()}
	if s.rrl != nil {
		st.RRLDropped, st.RRLSlipped = s.rrl.dropped.Load(), s.rrl.slipped.Load()
	}
	for i := range typeLabels {
		for j := range rcodeLabels {
			if v := s.counters.queries[i][j].Load(); v > 0 {
				st.Queries[QueryKey{typeLabels[i], rcodeLabels[j]}] = v
			}
		}
	}
	return st
}

var (
	queriesDesc = prometheus.NewDesc("vigil_dns_queries_total",
		"DNS requests answered by vigil's authoritative server, by question type and response code.",
		[]string{"type", "rcode"}, nil)
	truncatedDesc = prometheus.NewDesc("vigil_dns_truncated_total",
		"UDP answers sent truncated (TC bit) because they did not fit the client's buffer.", nil, nil)
	versionDesc = prometheus.NewDesc("vigil_dns_publication_version",
		"Publication version the DNS answers follow.", nil, nil)
	transfersDesc = prometheus.NewDesc("vigil_dns_transfers_total",
		"Zone transfers (AXFR, IXFR) asked of vigil, by result: served or refused.", []string{"result"}, nil)
	rrlDesc = prometheus.NewDesc("vigil_dns_rrl_limited_total",
		"UDP answers held back by response rate limiting, by action: dropped, or slipped (sent empty with the TC bit).", []string{"action"}, nil)
	notifyDesc = prometheus.NewDesc("vigil_dns_notify_total",
		"NOTIFY messages to secondaries, by result: sent (answered) or failed (given up after retries).", []string{"result"}, nil)
)

// collector exposes the counters to Prometheus.
type collector struct{ s *Server }

// Collector returns the server's Prometheus metrics: vigil_dns_queries_total
// {type, rcode}, vigil_dns_truncated_total, vigil_dns_publication_version,
// vigil_dns_transfers_total{result}, vigil_dns_notify_total{result} and
// vigil_dns_rrl_limited_total{action}.
// Register it once, for example with prometheus.MustRegister.
func (s *Server) Collector() prometheus.Collector { return collector{s} }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queriesDesc
	ch <- truncatedDesc
	ch <- versionDesc
	ch <- transfersDesc
	ch <- notifyDesc
	ch <- rrlDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for i := range typeLabels {
		for j := range rcodeLabels {
			if v := c.s.counters.queries[i][j].Load(); v > 0 {
				ch <- prometheus.MustNewConstMetric(queriesDesc, prometheus.CounterValue, float64(v), typeLabels[i], rcodeLabels[j])
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(truncatedDesc, prometheus.CounterValue, float64(c.s.counters.truncated.Load()))
	ch <- prometheus.MustNewConstMetric(versionDesc, prometheus.GaugeValue, float64(c.s.table.Load().version))
	if l := c.s.rrl; l != nil {
		ch <- prometheus.MustNewConstMetric(rrlDesc, prometheus.CounterValue, float64(l.dropped.Load()), "dropped")
		ch <- prometheus.MustNewConstMetric(rrlDesc, prometheus.CounterValue, float64(l.slipped.Load()), "slipped")
	}
	if c.s.xfr.on() {
		k := &c.s.counters
		ch <- prometheus.MustNewConstMetric(transfersDesc, prometheus.CounterValue, float64(k.xfrServed.Load()), "served")
		ch <- prometheus.MustNewConstMetric(transfersDesc, prometheus.CounterValue, float64(k.xfrRefused.Load()), "refused")
		ch <- prometheus.MustNewConstMetric(notifyDesc, prometheus.CounterValue, float64(k.notifySent.Load()), "sent")
		ch <- prometheus.MustNewConstMetric(notifyDesc, prometheus.CounterValue, float64(k.notifyFailed.Load()), "failed")
	}
}
