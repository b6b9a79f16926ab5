package dns

// The hidden primary (issue 35): zone transfers (AXFR, and IXFR from the
// tables of the last publications), TSIG and NOTIFY, so that the
// operator's own secondaries (Knot, NSD, BIND, PowerDNS) serve the zone.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/core/config"
)

const (
	// historyLen is how many past tables IXFR can compute a difference
	// from; an older serial gets the whole zone.
	historyLen = 32
	// xfrChunk bounds the bytes of records in one transfer message (a
	// TCP DNS message holds at most 65535).
	xfrChunk = 32 << 10
	// notifyTries bounds the NOTIFY attempts per secondary and change.
	notifyTries = 6
	// notifyTimeout is the deadline of one NOTIFY exchange.
	notifyTimeout = 2 * time.Second
)

// xfrSettings are the hidden primary's settings: who may transfer, whom
// to notify, and the TSIG key.
type xfrSettings struct {
	allow  []netip.Prefix
	notify []string
	// key is the TSIG key's name (fully qualified, lower case) and algo
	// its algorithm (fully qualified, as miekg/dns spells it); secret is
	// the base64 secret. key is "" without TSIG.
	key, algo, secret string
}

// on reports whether transfers or NOTIFY are configured: only then are
// the zone's records kept per table.
func (x *xfrSettings) on() bool { return len(x.allow) > 0 || len(x.notify) > 0 }

var tsigAlgos = map[string]string{
	"hmac-sha1":   dns.HmacSHA1,
	"hmac-sha224": dns.HmacSHA224,
	"hmac-sha256": dns.HmacSHA256,
	"hmac-sha384": dns.HmacSHA384,
	"hmac-sha512": dns.HmacSHA512,
}

// xfrFromConfig reads the hidden primary's settings, the TSIG secret from
// the environment. Errors name the key and the variable, never the secret.
func xfrFromConfig(cfg *config.DNSPublisher) (xfrSettings, error) {
	var x xfrSettings
	for _, a := range cfg.AllowTransfer {
		p, err := config.ParsePrefix(a)
		if err != nil {
			return x, fmt.Errorf("allow_transfer: %w", err)
		}
		x.allow = append(x.allow, p)
	}
	for _, n := range cfg.Notify {
		if _, _, err := net.SplitHostPort(n); err != nil {
			return x, fmt.Errorf("notify %q: %w", n, err)
		}
		x.notify = append(x.notify, n)
	}
	if cfg.TSIGKey == "" {
		return x, nil
	}
	x.key = dns.CanonicalName(cfg.TSIGKey)
	algo := cfg.TSIGAlgorithm
	if algo == "" {
		algo = "hmac-sha256"
	}
	var ok bool
	if x.algo, ok = tsigAlgos[strings.TrimSuffix(strings.ToLower(algo), ".")]; !ok {
		return x, fmt.Errorf("tsig_algorithm %q is not supported; use hmac-sha256", algo)
	}
	if cfg.TSIGSecretEnv == "" {
		return x, fmt.Errorf("TSIG key %s: tsig_secret_env is not set; name the environment variable holding the key's base64 secret", x.key)
	}
	x.secret = strings.TrimSpace(os.Getenv(cfg.TSIGSecretEnv))
	if x.secret == "" {
		return x, fmt.Errorf("TSIG key %s: the environment variable %s is empty or unset; export the key's base64 secret in it", x.key, cfg.TSIGSecretEnv)
	}
	if _, err := base64.StdEncoding.DecodeString(x.secret); err != nil {
		return x, fmt.Errorf("TSIG key %s: the environment variable %s does not hold base64 (as tsig-keygen and keymgr -t print it)", x.key, cfg.TSIGSecretEnv)
	}
	return x, nil
}

// zoneRecords returns the records a secondary holds for t, the SOA
// excepted, in a fixed order: the apex's NS and glue, then every name's
// records. A ramping site is transferred with the level it is ramping
// to (a zone file cannot draw per query), or the level it is leaving
// while the former has nothing to publish; a fail_closed site with
// nothing to publish has no records.
func (t *table) zoneRecords() []dns.RR {
	rrs := append([]dns.RR{}, t.ns...)
	for _, rr := range t.glue {
		if rr.Header().Name == t.zone {
			rrs = append(rrs, rr)
		}
	}
	names := make([]string, 0, len(t.names))
	for n := range t.names {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		draw := 0
		var r ramps
		n := t.names[name].side(&draw, &r)
		if n.servfail {
			continue
		}
		rrs = append(append(rrs, n.a...), n.aaaa...)
		if n.cname != nil {
			rrs = append(rrs, n.cname)
		}
	}
	return rrs
}

// zoneState is one table's zone as a secondary sees it.
type zoneState struct {
	serial uint32
	soa    dns.RR
	rrs    []dns.RR
	keys   []string // rrs' text, sorted: for comparing and diffing
}

func newZoneState(t *table) *zoneState {
	z := &zoneState{serial: t.soa[0].(*dns.SOA).Serial, soa: t.soa[0], rrs: t.zoneRecords()}
	z.keys = make([]string, len(z.rrs))
	for i, rr := range z.rrs {
		z.keys[i] = rr.String()
	}
	slices.Sort(z.keys)
	return z
}

// history keeps the zone of the last tables, newest last.
type history struct {
	mu    sync.Mutex
	zones []*zoneState
}

// add records z and reports whether its records differ from the newest
// before it (true for the first).
func (h *history) add(z *zoneState) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := len(h.zones) == 0 || !slices.Equal(h.zones[len(h.zones)-1].keys, z.keys)
	h.zones = append(h.zones, z)
	if len(h.zones) > historyLen {
		h.zones = slices.Delete(h.zones, 0, len(h.zones)-historyLen)
	}
	return changed
}

// find returns the newest zone and the one with serial (nil when no
// longer kept).
func (h *history) find(serial uint32) (cur, old *zoneState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.zones) == 0 {
		return nil, nil
	}
	cur = h.zones[len(h.zones)-1]
	for i := len(h.zones) - 1; i >= 0; i-- {
		if h.zones[i].serial == serial {
			return cur, h.zones[i]
		}
	}
	return cur, nil
}

// diff returns the records of old missing from cur, and those of cur
// missing from old.
func diff(old, cur *zoneState) (del, add []dns.RR) {
	inOld := make(map[string]bool, len(old.rrs))
	for _, k := range old.keys {
		inOld[k] = true
	}
	inCur := make(map[string]bool, len(cur.rrs))
	for _, k := range cur.keys {
		inCur[k] = true
	}
	for _, rr := range old.rrs {
		if !inCur[rr.String()] {
			del = append(del, rr)
		}
	}
	for _, rr := range cur.rrs {
		if !inOld[rr.String()] {
			add = append(add, rr)
		}
	}
	return del, add
}

// transferAllowed reports whether a transfer from addr may go on: TCP, an
// address of allow_transfer, and the TSIG key when one is configured. A
// refusal comes back as the rcode to answer and a reason for the log.
func (s *Server) transferAllowed(w dns.ResponseWriter, req *dns.Msg) (int, string) {
	var ip netip.Addr
	switch a := w.RemoteAddr().(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	}
	ip = ip.Unmap()
	allowed := false
	for _, p := range s.xfr.allow {
		if p.Contains(ip) {
			allowed = true
			break
		}
	}
	if !allowed {
		return dns.RcodeRefused, "address not in allow_transfer"
	}
	if s.xfr.key == "" {
		return dns.RcodeSuccess, ""
	}
	ts := req.IsTsig()
	switch {
	case ts == nil:
		return dns.RcodeNotAuth, fmt.Sprintf("not signed; TSIG key %s is required", s.xfr.key)
	case dns.CanonicalName(ts.Hdr.Name) != s.xfr.key:
		return dns.RcodeNotAuth, fmt.Sprintf("signed with TSIG key %s, not %s", dns.CanonicalName(ts.Hdr.Name), s.xfr.key)
	case w.TsigStatus() != nil:
		return dns.RcodeNotAuth, fmt.Sprintf("TSIG key %s: signature does not verify (%v): the secondary's secret differs", s.xfr.key, w.TsigStatus())
	}
	return dns.RcodeSuccess, ""
}

// serveTransfer answers an AXFR or IXFR question. It reports false when
// the question is not a transfer vigil serves (no allow_transfer): the
// normal path then refuses it.
func (s *Server) serveTransfer(w dns.ResponseWriter, req *dns.Msg) bool {
	if !s.xfr.on() || len(s.xfr.allow) == 0 || len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery {
		return false
	}
	q := req.Question[0]
	if q.Qtype != dns.TypeAXFR && q.Qtype != dns.TypeIXFR {
		return false
	}
	client := w.RemoteAddr().String()
	refuse := func(rcode int, why string) bool {
		s.counters.xfrRefused.Add(1) // before the answer leaves, as served
		s.log.Warn("zone transfer refused", "client", client, "type", dns.TypeToString[q.Qtype], "reason", why)
		m := new(dns.Msg)
		m.SetRcode(req, rcode)
		_ = w.WriteMsg(m)
		return true
	}
	if strings.ToLower(q.Name) != s.st.zone {
		return refuse(dns.RcodeNotAuth, "not the zone "+s.st.zone)
	}
	if rc, why := s.transferAllowed(w, req); rc != dns.RcodeSuccess {
		return refuse(rc, why)
	}
	cur, old := s.hist.find(0)
	if q.Qtype == dns.TypeIXFR {
		var serial uint32
		if len(req.Ns) > 0 {
			if soa, ok := req.Ns[0].(*dns.SOA); ok {
				serial = soa.Serial
			}
		}
		cur, old = s.hist.find(serial)
		if cur != nil && (serial == cur.serial || !serialBefore(serial, cur.serial)) {
			// Up to date (or newer than us): the current SOA alone.
			return s.sendTransfer(w, req, [][]dns.RR{{cur.soa}}, "IXFR", "up to date")
		}
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp && cur != nil {
			// RFC 1995 section 2: an answer that does not fit UDP is the
			// SOA alone, and the client comes back over TCP.
			return s.sendTransfer(w, req, [][]dns.RR{{cur.soa}}, "IXFR", "over UDP: retry over TCP")
		}
	} else if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		return refuse(dns.RcodeRefused, "AXFR over UDP; transfers go over TCP")
	}
	if cur == nil {
		return refuse(dns.RcodeServerFailure, "no zone yet")
	}
	var body []dns.RR
	kind := "AXFR"
	if old != nil && q.Qtype == dns.TypeIXFR {
		// A condensed difference (RFC 1995 section 4).
		del, add := diff(old, cur)
		body = append(append(append(append([]dns.RR{cur.soa, old.soa}, del...), cur.soa), add...), cur.soa)
		kind = "IXFR"
	} else {
		body = append(append([]dns.RR{cur.soa}, cur.rrs...), cur.soa)
	}
	return s.sendTransfer(w, req, chunk(body), kind, "")
}

// serialBefore reports whether serial a is before b in RFC 1982 order.
func serialBefore(a, b uint32) bool { return a != b && int32(b-a) > 0 }

// chunk splits rrs into messages of at most xfrChunk bytes of records.
func chunk(rrs []dns.RR) [][]dns.RR {
	var out [][]dns.RR
	var cur []dns.RR
	size := 0
	for _, rr := range rrs {
		l := dns.Len(rr)
		if size+l > xfrChunk && len(cur) > 0 {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, rr)
		size += l
	}
	return append(out, cur)
}

// sendTransfer writes msgs as the answer to req, signed when req was.
func (s *Server) sendTransfer(w dns.ResponseWriter, req *dns.Msg, msgs [][]dns.RR, kind, note string) bool {
	ch := make(chan *dns.Envelope, len(msgs))
	n := 0
	for _, m := range msgs {
		ch <- &dns.Envelope{RR: m}
		n += len(m)
	}
	close(ch)
	// Counted before the first message leaves: a client that has read
	// the whole answer finds it counted.
	s.counters.xfrServed.Add(1)
	tr := new(dns.Transfer)
	if err := tr.Out(w, req, ch); err != nil {
		s.log.Warn("zone transfer failed", "client", w.RemoteAddr().String(), "type", kind, "error", err)
		return true
	}
	s.log.Info("zone transferred", "client", w.RemoteAddr().String(), "type", kind, "records", n, "note", note)
	return true
}

// notifier sends NOTIFY to every secondary of notify when the zone
// changes, retrying with backoff; a newer change replaces one not yet
// sent.
type notifier struct {
	s    *Server
	kick chan *zoneState
}

func (s *Server) startNotifier(ctx context.Context) {
	if len(s.xfr.notify) == 0 {
		return
	}
	s.notify = &notifier{s: s, kick: make(chan *zoneState, 1)}
	s.wg.Go(func() { s.notify.run(ctx) })
}

// changed queues a NOTIFY for z, replacing one still queued.
func (n *notifier) changed(z *zoneState) {
	if n == nil {
		return
	}
	for {
		select {
		case n.kick <- z:
			return
		default:
		}
		select {
		case <-n.kick:
		default:
		}
	}
}

func (n *notifier) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case z := <-n.kick:
			var wg sync.WaitGroup
			for _, target := range n.s.xfr.notify {
				wg.Go(func() { n.send(ctx, target, z) })
			}
			wg.Wait()
		}
	}
}

// errRefused marks a NOTIFY answer that retrying will not change.
var errRefused = errors.New("refused")

// send notifies one secondary of z, with retries.
func (n *notifier) send(ctx context.Context, target string, z *zoneState) {
	s := n.s
	m := new(dns.Msg)
	m.SetNotify(s.st.zone)
	m.Answer = []dns.RR{z.soa}
	c := &dns.Client{Net: "udp", Timeout: notifyTimeout}
	if s.xfr.key != "" {
		c.TsigSecret = map[string]string{s.xfr.key: s.xfr.secret}
	}
	b := &backoff.ExponentialBackOff{InitialInterval: 250 * time.Millisecond, RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: 5 * time.Second}
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		if s.xfr.key != "" {
			m.SetTsig(s.xfr.key, s.xfr.algo, 300, time.Now().Unix())
		}
		r, _, err := c.ExchangeContext(ctx, m, target)
		if err != nil {
			return struct{}{}, err
		}
		switch r.Rcode {
		case dns.RcodeSuccess:
			return struct{}{}, nil
		case dns.RcodeNotAuth:
			why := "it does not know the zone or does not take NOTIFY from this address"
			if s.xfr.key != "" {
				why = fmt.Sprintf("check that it has TSIG key %s with the same secret and lets it notify", s.xfr.key)
			}
			return struct{}{}, backoff.Permanent(fmt.Errorf("%w: NOTAUTH (%s)", errRefused, why))
		default:
			return struct{}{}, backoff.Permanent(fmt.Errorf("%w: %s", errRefused, dns.RcodeToString[r.Rcode]))
		}
	}, backoff.WithBackOff(b), backoff.WithMaxTries(notifyTries))
	if err != nil {
		if ctx.Err() == nil {
			s.counters.notifyFailed.Add(1)
			s.log.Error("NOTIFY failed", "secondary", target, "zone", s.st.zone, "serial", z.serial, "error", err)
		}
		return
	}
	s.counters.notifySent.Add(1)
	s.log.Debug("NOTIFY sent", "secondary", target, "serial", z.serial)
}
