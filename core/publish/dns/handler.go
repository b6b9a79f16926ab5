package dns

import (
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// accept is the server's first look at a request's header: it applies the
// library's default checks and counts what they reject.
func (s *Server) accept(dh dns.Header) dns.MsgAcceptAction {
	action := dns.DefaultMsgAcceptFunc(dh)
	switch action {
	case dns.MsgReject:
		s.counters.count(typeNone, rcodeIndex(dns.RcodeFormatError))
	case dns.MsgRejectNotImplemented:
		s.counters.count(typeNone, rcodeIndex(dns.RcodeNotImplemented))
	}
	return action
}

func (s *Server) serveDNS(w dns.ResponseWriter, req *dns.Msg) {
	if s.serveTransfer(w, req) {
		return
	}
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	if ua, udp := w.RemoteAddr().(*net.UDPAddr); udp && s.noFast {
		// With the fast path on, its read loop limits every UDP query.
		switch s.rrl.action(ua.IP, s.rrl.now()) {
		case rrlDrop:
			return
		case rrlSlip:
			if !req.Response {
				_ = w.WriteMsg(slipMsg(req))
			}
			return
		}
	}
	var ts *dns.TSIG
	if s.xfr.key != "" {
		ts = req.IsTsig()
	}
	if ts != nil && !req.Response && (w.TsigStatus() != nil || dns.CanonicalName(ts.Hdr.Name) != s.xfr.key) {
		// RFC 8945 section 5.2: a request whose signature does not
		// verify gets NOTAUTH, unsigned.
		s.log.Warn("TSIG signature rejected", "client", w.RemoteAddr().String(), "key", dns.CanonicalName(ts.Hdr.Name), "error", w.TsigStatus())
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeNotAuth)
		_ = w.WriteMsg(m)
		return
	}
	m := s.reply(req, tcp)
	if m == nil {
		return
	}
	if ts != nil {
		m.SetTsig(ts.Hdr.Name, ts.Algorithm, ts.Fudge, time.Now().Unix())
	}
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("writing an answer", "client", w.RemoteAddr().String(), "error", err)
	}
}

// reply builds the answer to req, received over TCP or UDP, sized for the
// client. It returns nil when nothing should be sent (req is a response).
func (s *Server) reply(req *dns.Msg, tcp bool) *dns.Msg {
	m, _ := s.replyFrom(s.table.Load(), req, tcp, sideDraw, true)
	return m
}

// replyFrom is reply answering from table t, from side of the ramps it
// meets (sideDraw: a draw per query), counted in the statistics when count
// is set. It says what ramps the answer met.
func (s *Server) replyFrom(t *table, req *dns.Msg, tcp bool, side int, count bool) (*dns.Msg, ramps) {
	var r ramps
	if req.Response {
		return nil, r
	}
	m := new(dns.Msg)
	m.SetReply(req)
	qtype := typeNone
	opt := req.IsEdns0()
	switch {
	case req.Opcode != dns.OpcodeQuery:
		m.Rcode = dns.RcodeNotImplemented
	case len(req.Question) != 1:
		m.Rcode = dns.RcodeFormatError
	case optCount(req) > 1:
		// RFC 6891 section 6.1.1: more than one OPT record is a FORMERR,
		// answered without an OPT record of ours.
		m.Rcode = dns.RcodeFormatError
		opt = nil
	case opt != nil && opt.Version() != 0:
		m.Rcode = dns.RcodeBadVers
	default:
		q := req.Question[0]
		qtype = typeIndex(q.Qtype)
		switch {
		case q.Qclass != dns.ClassINET:
			m.Rcode = dns.RcodeNotImplemented
		case q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR:
			m.Rcode = dns.RcodeRefused // no zone transfers
		case q.Qtype == dns.TypeOPT:
			m.Rcode = dns.RcodeFormatError
		default:
			r = t.resolve(m, strings.ToLower(q.Name), q.Qtype, side)
		}
	}
	size := dns.MaxMsgSize
	if opt != nil {
		m.SetEdns0(advertisedUDPSize, opt.Do())
	}
	if !tcp {
		size = dns.MinMsgSize
		if opt != nil {
			size = min(max(int(opt.UDPSize()), dns.MinMsgSize), readBuffer)
		}
	}
	m.Truncate(size)
	// Truncate turns compression off when the plain answer fits; names are
	// compressed all the same (RFC 1035 4.1.4), as NSD and BIND do: the
	// answer of a site with two A records is 69 bytes instead of 107.
	m.Compress = true
	if !count {
		return m, r
	}
	if m.Truncated {
		s.counters.truncated.Add(1)
	}
	s.counters.count(qtype, rcodeIndex(m.Rcode))
	return m, r
}

// optCount counts the OPT records of req's additional section.
func optCount(req *dns.Msg) int {
	n := 0
	for _, rr := range req.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			n++
		}
	}
	return n
}
