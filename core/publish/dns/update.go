package dns

// Dynamic updates (issue 35): the publish "dns_update" block pushes each
// site's current addresses into a zone that the operator's own primary
// (BIND, Knot, PowerDNS) serves, with RFC 2136 UPDATE messages signed
// with TSIG. vigil never serves that zone.
//
// Per site whose hostname lies in the zone, the records are those
// publish "dns" would answer (the same rules: the current level's origins
// that are not unhealthy, every one when none is left, the transition TTL
// while the site moves), its IP origins only: a hostname origin cannot be
// pushed (a CNAME would have to replace the A and AAAA records, which an
// operator's zone may not expect) and is left out with a warning.
//
// Each name gets its own UPDATE, so that one refusal does not hold the
// others back. Its prerequisites are the A and AAAA records vigil last
// wrote for the name (at start, those the primary serves then): when a
// hand edit changed them since, the primary refuses the update (NXRRSET
// or YXRRSET) and vigil reports a conflict instead of overwriting the
// edit; the next publication that changes the site reads the records
// again and writes its own. Network errors and SERVFAIL are retried with
// exponential backoff; a newer publication replaces the one being
// retried. Refusals (NOTAUTH, REFUSED, a prerequisite) are not retried.
// The outcome per site is in Updater.Status (Updater.View is the site
// view's dns_update) and the metrics
// vigil_dns_update_total{result} and vigil_dns_update_failing{site}.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/hashicorp/go-hclog"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/sdk/publication"
)

const (
	// updateTries bounds the attempts of one name's UPDATE: about 30 s
	// of backoff, 5 s apart at most.
	updateTries = 10
	// updateTimeout is the default deadline of one exchange.
	updateTimeout = 5 * time.Second
)

// UpdateStatus is the outcome of the last UPDATE of one site.
type UpdateStatus struct {
	// Name is the site's DNS name; Version the publication last pushed
	// (or tried).
	Name    string
	Version uint64
	// OK is set when the primary took the update; Error says why not
	// otherwise, and Conflict is set when a prerequisite failed (the
	// records were changed by hand).
	OK       bool
	Conflict bool
	Error    string
	// Failures counts the failed updates of the site since start.
	Failures uint64
	At       time.Time
}

// Updater sends RFC 2136 dynamic updates to the operator's primary.
type Updater struct {
	st      settings
	server  string
	key     string // fully qualified, "" without TSIG
	algo    string
	secret  string
	timeout time.Duration
	hub     *publish.Hub
	log     hclog.Logger

	mu   sync.Mutex
	last map[string]rrsets // the records vigil last wrote, by name
	// tried are the records vigil last tried to write, by name: a name
	// whose update succeeded or met a conflict is not tried again until
	// the records it should have change.
	tried  map[string]rrsets
	status map[string]*UpdateStatus
	// skipped are the names of the last publication that are not pushed
	// (their origins are host names).
	skipped map[string]bool
	ok      atomic.Uint64
	failed  atomic.Uint64
	retries atomic.Uint64

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// rrsets are one name's A and AAAA records.
type rrsets struct{ a, aaaa []dns.RR }

// NewUpdater returns an updater for cfg following hub. The TSIG secret is
// read from the environment now; errors name the key and the variable,
// never the secret.
func NewUpdater(cfg *config.DNSUpdatePublisher, hub *publish.Hub, logger hclog.Logger) (*Updater, error) {
	if cfg == nil || hub == nil {
		return nil, errors.New("dns update: no configuration or no publication hub")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if _, _, err := net.SplitHostPort(cfg.Server); err != nil {
		return nil, fmt.Errorf("dns update: server %q: %w; give the primary's address and port, such as \"192.0.2.53:53\"", cfg.Server, err)
	}
	zone := dns.Fqdn(strings.ToLower(cfg.Zone))
	if _, ok := dns.IsDomainName(zone); !ok || cfg.Zone == "" {
		return nil, fmt.Errorf("dns update: zone %q is not a domain name", cfg.Zone)
	}
	u := &Updater{
		st:      settings{zone: zone, ttl: uint32(cfg.TTL), transitionTTL: uint32(cfg.TTL)},
		server:  cfg.Server,
		timeout: cfg.Timeout,
		hub:     hub,
		log:     logger.Named("dns-update"),
		last:    map[string]rrsets{},
		tried:   map[string]rrsets{},
		status:  map[string]*UpdateStatus{},
	}
	if cfg.TransitionTTL > 0 {
		u.st.transitionTTL = uint32(cfg.TransitionTTL)
	}
	if u.timeout <= 0 {
		u.timeout = updateTimeout
	}
	x, err := xfrFromConfig(&config.DNSPublisher{TSIGKey: cfg.TSIGKey, TSIGAlgorithm: cfg.TSIGAlgorithm, TSIGSecretEnv: cfg.TSIGSecretEnv})
	if err != nil {
		return nil, fmt.Errorf("dns update: %w", err)
	}
	u.key, u.algo, u.secret = x.key, x.algo, x.secret
	return u, nil
}

// Start follows the hub until ctx ends or Close is called, pushing the
// current publication first.
func (u *Updater) Start(ctx context.Context) {
	ctx, u.cancel = context.WithCancel(ctx)
	u.wg.Go(func() { u.follow(ctx) })
}

// Close stops the updater and waits for it.
func (u *Updater) Close() {
	if u.cancel != nil {
		u.cancel()
	}
	u.wg.Wait()
}

func (u *Updater) follow(ctx context.Context) {
	snap := u.hub.Current()
	for {
		u.push(ctx, snap)
		next, ok := u.hub.Wait(ctx, snap.Version)
		if !ok {
			return
		}
		snap = next
	}
}

// desired returns the records each site in the zone should have.
func (u *Updater) desired(snap *publication.Snapshot) map[string]rrsets {
	t, notes := build(u.st, snap)
	for _, n := range notes {
		u.log.Warn("not pushed", "version", snap.Version, "detail", n)
	}
	out := map[string]rrsets{}
	skipped := map[string]bool{}
	defer func() {
		u.mu.Lock()
		u.skipped = skipped
		u.mu.Unlock()
	}()
	for i := range snap.Sites {
		site := &snap.Sites[i]
		name := dns.Fqdn(strings.ToLower(strings.TrimSuffix(site.Hostname, ".")))
		n := t.names[name]
		if site.Hostname == "" || n == nil || name == u.st.zone {
			continue
		}
		draw := 0
		var r ramps
		n = n.side(&draw, &r)
		if n.cname != nil {
			u.log.Warn("not pushed: the site's origins are host names, and dynamic updates push addresses only", "site", site.Name, "name", name)
			skipped[name] = true
			continue
		}
		out[name] = rrsets{a: n.a, aaaa: n.aaaa}
	}
	return out
}

// push sends the UPDATEs that snap needs, one per changed name, in
// parallel with a bound.
func (u *Updater) push(ctx context.Context, snap *publication.Snapshot) {
	want := u.desired(snap)
	names := make([]string, 0, len(want))
	for name, rr := range want {
		u.mu.Lock()
		tried, known := u.tried[name]
		st := u.status[name]
		u.mu.Unlock()
		if known && st != nil && (st.OK || st.Conflict) && sameRRs(tried.a, rr.a) && sameRRs(tried.aaaa, rr.aaaa) {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, name := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			u.update(ctx, snap.Version, name, want[name])
		})
	}
	wg.Wait()
}

// sameRRs reports whether a and b hold the same records, in any order,
// TTL included.
func sameRRs(a, b []dns.RR) bool {
	if len(a) != len(b) {
		return false
	}
	as, bs := rrStrings(a), rrStrings(b)
	return slices.Equal(as, bs)
}

func rrStrings(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	slices.Sort(out)
	return out
}

func copyRRs(rrs []dns.RR) []dns.RR {
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		out[i] = dns.Copy(rr)
	}
	return out
}

// errConflict marks a prerequisite that failed: the records changed.
var errConflict = errors.New("conflict")

// update pushes one name's records, with retries.
func (u *Updater) update(ctx context.Context, version uint64, name string, want rrsets) {
	u.mu.Lock()
	last, known := u.last[name]
	if st := u.status[name]; st != nil && st.Conflict {
		known = false // read what the hand edit left, and write over it now
	}
	u.mu.Unlock()
	b := &backoff.ExponentialBackOff{InitialInterval: 250 * time.Millisecond, RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: 5 * time.Second}
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		if cur := u.hub.Current(); cur.Version > version {
			// A newer publication will push its own records.
			return struct{}{}, backoff.Permanent(errSuperseded)
		}
		if !known {
			cur, err := u.read(ctx, name)
			if err != nil {
				return struct{}{}, fmt.Errorf("reading the records of %s from %s: %w", name, u.server, err)
			}
			last, known = cur, true
		}
		return struct{}{}, u.send(ctx, name, last, want)
	}, backoff.WithBackOff(b), backoff.WithMaxTries(updateTries), backoff.WithNotify(func(err error, next time.Duration) {
		u.retries.Add(1)
		u.log.Warn("dynamic update failed; retrying", "name", name, "version", version, "in", next, "error", err)
	}))
	if errors.Is(err, errSuperseded) || ctx.Err() != nil {
		return
	}
	u.mu.Lock()
	u.tried[name] = want
	if err == nil {
		u.last[name] = want
	}
	u.mu.Unlock()
	u.report(version, name, err)
}

var errSuperseded = errors.New("superseded by a newer publication")

// send is one UPDATE of name from last to want.
func (u *Updater) send(ctx context.Context, name string, last, want rrsets) error {
	m := new(dns.Msg)
	m.SetUpdate(u.st.zone)
	for _, set := range []struct {
		rrtype     uint16
		last, want []dns.RR
	}{{dns.TypeA, last.a, want.a}, {dns.TypeAAAA, last.aaaa, want.aaaa}} {
		// Used and Insert change the headers of what they are given:
		// copies, since the records are shared with the tables.
		if len(set.last) == 0 {
			m.RRsetNotUsed([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: name, Rrtype: set.rrtype, Class: dns.ClassINET}}})
		} else {
			m.Used(copyRRs(set.last))
		}
		m.RemoveRRset([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: name, Rrtype: set.rrtype, Class: dns.ClassINET}}})
		if len(set.want) > 0 {
			m.Insert(copyRRs(set.want))
		}
	}
	c := &dns.Client{Net: "tcp", Timeout: u.timeout}
	if u.key != "" {
		c.TsigSecret = map[string]string{u.key: u.secret}
		m.SetTsig(u.key, u.algo, 300, time.Now().Unix())
	}
	r, _, err := c.ExchangeContext(ctx, m, u.server)
	if err != nil {
		if errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrSecret) || errors.Is(err, dns.ErrNoSig) || errors.Is(err, dns.ErrAuth) {
			return backoff.Permanent(fmt.Errorf("UPDATE %s at %s: TSIG key %s is not accepted (%v): check that the primary has this key with the same secret and algorithm", name, u.server, u.key, err))
		}
		return fmt.Errorf("UPDATE %s at %s: %w", name, u.server, err)
	}
	return u.rcodeError(name, r)
}

// rcodeError turns an UPDATE answer into nil or a clear error.
func (u *Updater) rcodeError(name string, r *dns.Msg) error {
	rc := dns.RcodeToString[r.Rcode]
	tsigErr := ""
	if ts := r.IsTsig(); ts != nil && ts.Error != 0 {
		tsigErr = dns.RcodeToString[int(ts.Error)]
	}
	switch r.Rcode {
	case dns.RcodeSuccess:
		return nil
	case dns.RcodeServerFailure:
		return fmt.Errorf("UPDATE %s: %s answered SERVFAIL", name, u.server)
	case dns.RcodeNXRrset, dns.RcodeYXRrset, dns.RcodeNameError, dns.RcodeYXDomain:
		return backoff.Permanent(fmt.Errorf("%w: the records of %s at %s are not those vigil last wrote (%s): changed by hand? vigil does not overwrite them until the site's next change", errConflict, name, u.server, rc))
	case dns.RcodeNotAuth:
		if u.key == "" {
			return backoff.Permanent(fmt.Errorf("UPDATE %s refused by %s: NOTAUTH: it is not authoritative for %s, or wants a TSIG key (set tsig_key and tsig_secret_env)", name, u.server, u.st.zone))
		}
		if tsigErr != "" {
			return backoff.Permanent(fmt.Errorf("UPDATE %s refused by %s: NOTAUTH, TSIG error %s: check that it has TSIG key %s with the same secret and algorithm", name, u.server, tsigErr, u.key))
		}
		return backoff.Permanent(fmt.Errorf("UPDATE %s refused by %s: NOTAUTH: it is not authoritative for %s, or does not know TSIG key %s", name, u.server, u.st.zone, u.key))
	case dns.RcodeRefused:
		who := "without a key"
		if u.key != "" {
			who = "with TSIG key " + u.key
		}
		return backoff.Permanent(fmt.Errorf("UPDATE %s refused by %s: REFUSED: its policy does not let updates %s change %s (BIND: allow-update or update-policy; Knot: an acl with action update)", name, u.server, who, u.st.zone))
	}
	return backoff.Permanent(fmt.Errorf("UPDATE %s at %s: %s", name, u.server, rc))
}

// read asks the primary for name's A and AAAA records, over TCP.
func (u *Updater) read(ctx context.Context, name string) (rrsets, error) {
	var out rrsets
	c := &dns.Client{Net: "tcp", Timeout: u.timeout}
	for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
		m := new(dns.Msg)
		m.SetQuestion(name, t)
		m.RecursionDesired = false
		r, _, err := c.ExchangeContext(ctx, m, u.server)
		if err != nil {
			return out, err
		}
		if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
			return out, fmt.Errorf("%s %s: %s", name, dns.TypeToString[t], dns.RcodeToString[r.Rcode])
		}
		for _, rr := range r.Answer {
			if rr.Header().Rrtype == t && strings.EqualFold(rr.Header().Name, name) {
				if t == dns.TypeA {
					out.a = append(out.a, rr)
				} else {
					out.aaaa = append(out.aaaa, rr)
				}
			}
		}
	}
	return out, nil
}

// report records the outcome of name's update.
func (u *Updater) report(version uint64, name string, err error) {
	u.mu.Lock()
	st := u.status[name]
	if st == nil {
		st = &UpdateStatus{Name: name}
		u.status[name] = st
	}
	st.Version, st.At, st.OK, st.Conflict, st.Error = version, time.Now(), err == nil, errors.Is(err, errConflict), ""
	if err != nil {
		st.Error = err.Error()
		st.Failures++
	}
	u.mu.Unlock()
	if err != nil {
		u.failed.Add(1)
		u.log.Error("dynamic update failed", "name", name, "version", version, "error", err)
		return
	}
	u.ok.Add(1)
	u.log.Info("dynamic update applied", "name", name, "version", version)
}

// Status returns the outcome of the last update of each name pushed.
func (u *Updater) Status() map[string]UpdateStatus {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]UpdateStatus, len(u.status))
	for n, st := range u.status {
		out[n] = *st
	}
	return out
}

// UpdatedName is the name that publish "dns_update" for zone updates
// for a site named hostname, fully qualified and in lower case; false
// when it updates none (no hostname, outside the zone, or its apex).
func UpdatedName(zone, hostname string) (string, bool) {
	if hostname == "" {
		return "", false
	}
	zone = dns.Fqdn(strings.ToLower(zone))
	name := dns.Fqdn(strings.ToLower(strings.TrimSuffix(hostname, ".")))
	if name == zone || !dns.IsSubDomain(zone, name) {
		return "", false
	}
	return name, true
}

// View is the API's view of the update of the name hostname: nil when
// the name lies outside the zone (or is its apex), pending before its
// first update, skipped when its origins are host names.
func (u *Updater) View(hostname string) *api.DNSUpdateView {
	name, ok := UpdatedName(u.st.zone, hostname)
	if !ok {
		return nil
	}
	u.mu.Lock()
	st := u.status[name]
	var cp UpdateStatus
	if st != nil {
		cp = *st
	}
	skipped := u.skipped[name]
	u.mu.Unlock()
	if skipped {
		return &api.DNSUpdateView{Name: name, State: api.DNSUpdateSkipped,
			Error: "not pushed: the site's origins are host names, and dynamic updates push addresses only; give the origins IP addresses, or serve the zone with publish \"dns\""}
	}
	if st == nil {
		return &api.DNSUpdateView{Name: name, State: api.DNSUpdatePending}
	}
	v := &api.DNSUpdateView{Name: name, Version: cp.Version, Error: cp.Error, Failures: cp.Failures}
	if !cp.At.IsZero() {
		at := cp.At.UTC()
		v.At = &at
	}
	switch {
	case cp.OK:
		v.State = api.DNSUpdateOK
	case cp.Conflict:
		v.State = api.DNSUpdateConflict
	default:
		v.State = api.DNSUpdateFailing
	}
	return v
}

var (
	updateDesc = prometheus.NewDesc("vigil_dns_update_total",
		"Dynamic updates (RFC 2136) sent to the operator's primary, by result: ok, or failed (after the retries, or refused).", []string{"result"}, nil)
	failingDesc = prometheus.NewDesc("vigil_dns_update_failing",
		"1 when the last dynamic update of a name failed, else 0.", []string{"name"}, nil)
)

type updateCollector struct{ u *Updater }

// Collector returns the updater's Prometheus metrics:
// vigil_dns_update_total{result} and vigil_dns_update_failing{name}.
func (u *Updater) Collector() prometheus.Collector { return updateCollector{u} }

func (c updateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- updateDesc
	ch <- failingDesc
}

func (c updateCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(updateDesc, prometheus.CounterValue, float64(c.u.ok.Load()), "ok")
	ch <- prometheus.MustNewConstMetric(updateDesc, prometheus.CounterValue, float64(c.u.failed.Load()), "failed")
	for name, st := range c.u.Status() {
		v := 0.0
		if !st.OK {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(failingDesc, prometheus.GaugeValue, v, name)
	}
}
