package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/sdk/publication"
)

const (
	// readBuffer is the largest UDP request read, and the largest UDP
	// answer sent whatever buffer size a client advertises.
	readBuffer = 4096
	// advertisedUDPSize is the buffer size vigil advertises in its own OPT
	// record (the DNS Flag Day 2020 value, which avoids fragmentation).
	advertisedUDPSize = 1232
	// shutdownTimeout bounds how long Close waits for TCP connections.
	shutdownTimeout = 5 * time.Second
	// bindAttempts bounds the search for a port free on both UDP and TCP
	// when listen asks for port 0.
	bindAttempts = 16
)

// Server is vigil's authoritative DNS server for one zone.
type Server struct {
	st     settings
	listen string
	hub    *publish.Hub
	log    hclog.Logger

	table    atomic.Pointer[table]
	counters counters
	// noFast turns the UDP fast path off (benchmarks compare both).
	noFast bool
	// xfr are the hidden primary's settings; hist the zones of the last
	// tables when transfers or NOTIFY are on, and notify sends NOTIFY.
	xfr    xfrSettings
	hist   history
	notify *notifier
	// rrl limits UDP answers per client network (nil: off).
	rrl *limiter

	mu      sync.Mutex
	state   int // 0 new, 1 started, 2 closed
	addr    string
	udp     *dns.Server
	tcp     *dns.Server
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped sync.Once
}

// New returns a server for cfg that answers from hub's publications. It
// builds the first answer table from hub.Current() at once; nothing is bound
// until Start.
func New(cfg *config.DNSPublisher, hub *publish.Hub, logger hclog.Logger) (*Server, error) {
	if cfg == nil {
		return nil, errors.New("dns publisher: no configuration")
	}
	if hub == nil {
		return nil, errors.New("dns publisher: no publication hub")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if cfg.Listen == "" {
		return nil, errors.New("dns publisher: listen address is empty; set listen, such as \"127.0.0.1:5353\"")
	}
	if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
		return nil, fmt.Errorf("dns publisher: listen %q: %w", cfg.Listen, err)
	}
	zone := dns.Fqdn(strings.ToLower(cfg.Zone))
	if _, ok := dns.IsDomainName(zone); !ok || cfg.Zone == "" {
		return nil, fmt.Errorf("dns publisher: zone %q is not a domain name", cfg.Zone)
	}
	if cfg.TTL < 0 || int64(cfg.TTL) > int64(^uint32(0)>>1) {
		return nil, fmt.Errorf("dns publisher: ttl %d is out of range (0 to 2147483647)", cfg.TTL)
	}
	st := settings{zone: zone, ttl: uint32(cfg.TTL), failClosed: cfg.FailClosed, transitionTTL: uint32(cfg.TTL)}
	if cfg.TransitionTTL > 0 {
		if int64(cfg.TransitionTTL) > int64(^uint32(0)>>1) {
			return nil, fmt.Errorf("dns publisher: transition_ttl %d is out of range (0 to 2147483647)", cfg.TransitionTTL)
		}
		st.transitionTTL = uint32(cfg.TransitionTTL)
	}
	if cfg.RName != "" {
		r := dns.Fqdn(strings.ToLower(cfg.RName))
		if _, ok := dns.IsDomainName(r); !ok {
			return nil, fmt.Errorf("dns publisher: rname %q is not a domain name", cfg.RName)
		}
		st.rname = r
	}
	for _, t := range []struct {
		name string
		v    int
		into *uint32
	}{{"soa_refresh", cfg.SOARefresh, &st.refresh}, {"soa_retry", cfg.SOARetry, &st.retry}, {"soa_expire", cfg.SOAExpire, &st.expire}} {
		if t.v < 0 || int64(t.v) > int64(^uint32(0)>>1) {
			return nil, fmt.Errorf("dns publisher: %s %d is out of range (1 to 2147483647)", t.name, t.v)
		}
		*t.into = uint32(t.v)
	}
	xfr, err := xfrFromConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dns publisher: %w", err)
	}
	for _, n := range cfg.NS {
		n = dns.Fqdn(strings.ToLower(n))
		if _, ok := dns.IsDomainName(n); !ok {
			return nil, fmt.Errorf("dns publisher: name server %q is not a domain name", n)
		}
		st.ns = append(st.ns, n)
	}
	for name, addrs := range cfg.NSAddresses {
		n := dns.Fqdn(strings.ToLower(name))
		for _, raw := range addrs {
			a, err := netip.ParseAddr(raw)
			if err != nil {
				return nil, fmt.Errorf("dns publisher: ns_addresses[%q]: %w", name, err)
			}
			if st.nsAddrs == nil {
				st.nsAddrs = map[string][]netip.Addr{}
			}
			st.nsAddrs[n] = append(st.nsAddrs[n], a.WithZone("").Unmap())
		}
	}
	rrl, err := rrlFromConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dns publisher: %w", err)
	}
	s := &Server{st: st, listen: cfg.Listen, hub: hub, log: logger.Named("dns"), xfr: xfr, rrl: newLimiter(rrl)}
	for _, n := range st.ns {
		if inZone(n, zone) && len(st.nsAddrs[n]) == 0 {
			s.log.Warn("in-zone name server has no address: it answers NXDOMAIN and resolvers cannot reach it; give ns_addresses", "ns", n)
		}
	}
	s.swap(hub.Current())
	return s, nil
}

// swap builds the table for snap and makes it the one queries read.
func (s *Server) swap(snap *publication.Snapshot) {
	t, notes := build(s.st, snap)
	var z *zoneState
	if s.xfr.on() {
		z = newZoneState(t)
	}
	s.table.Store(t)
	if z != nil && s.hist.add(z) {
		s.notify.changed(z)
	}
	for _, n := range notes {
		s.log.Warn("not published in DNS", "version", snap.Version, "detail", n)
	}
	s.log.Debug("answers rebuilt", "version", snap.Version, "names", len(t.names))
}

// Start binds UDP and TCP on the listen address (the same port on both;
// port 0 picks a free one), starts answering and follows the publication
// hub. It returns once both listeners are serving. The server stops when
// ctx ends or Close is called.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case 1:
		return errors.New("dns publisher: already started")
	case 2:
		return errors.New("dns publisher: closed")
	}
	pc, ln, err := bind(s.listen)
	if err != nil {
		return fmt.Errorf("dns publisher: %w", err)
	}
	if !s.noFast {
		// The fast path reads and writes the socket in batches (batch.go).
		u, err := newUDPSocket(pc.(*net.UDPConn))
		if err != nil {
			pc.Close()
			ln.Close()
			return fmt.Errorf("dns publisher: listen udp %s: %w", s.listen, err)
		}
		pc = u
	}
	started := make(chan struct{}, 2)
	errc := make(chan error, 2)
	var tsig map[string]string
	if s.xfr.key != "" {
		tsig = map[string]string{s.xfr.key: s.xfr.secret}
	}
	mk := func() *dns.Server {
		return &dns.Server{
			TsigSecret:        tsig,
			Handler:           dns.HandlerFunc(s.serveDNS),
			DecorateReader:    s.decorateReader,
			UDPSize:           readBuffer,
			MsgAcceptFunc:     s.accept,
			NotifyStartedFunc: func() { started <- struct{}{} },
		}
	}
	s.udp, s.tcp = mk(), mk()
	s.udp.PacketConn, s.tcp.Listener = pc, ln
	s.tcp.MaxTCPQueries = -1 // keep a resolver's connection open (RFC 7766); IdleTimeout still ends it
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		s.wg.Go(func() {
			if err := srv.ActivateAndServe(); err != nil {
				errc <- err
			}
		})
	}
	for range 2 {
		select {
		case <-started:
		case err := <-errc:
			s.stopServers()
			s.wg.Wait()
			s.state = 2
			return fmt.Errorf("dns publisher: serving on %s: %w", s.listen, err)
		case <-ctx.Done():
			s.stopServers()
			s.wg.Wait()
			s.state = 2
			return fmt.Errorf("dns publisher: starting on %s: %w", s.listen, ctx.Err())
		}
	}
	s.addr = pc.LocalAddr().String()
	s.state = 1
	wctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.startNotifier(wctx)
	if s.xfr.on() {
		// Secondaries learn of a restart at once.
		if cur, _ := s.hist.find(0); cur != nil {
			s.notify.changed(cur)
		}
	}
	s.wg.Go(func() { s.follow(wctx) })
	s.wg.Go(func() {
		<-wctx.Done()
		s.stopServers()
	})
	s.log.Info("serving DNS", "addr", s.addr, "zone", s.st.zone, "version", s.table.Load().version)
	return nil
}

// follow rebuilds the answer table on every new publication until ctx
// ends. Nothing polls: hub.Wait returns when a newer version is published.
func (s *Server) follow(ctx context.Context) {
	after := s.table.Load().version
	if cur := s.hub.Current(); cur.Version != after {
		// Published between New and Start.
		s.swap(cur)
		after = cur.Version
	}
	for {
		snap, ok := s.hub.Wait(ctx, after)
		if !ok {
			return
		}
		s.swap(snap)
		after = snap.Version
	}
}

// stopServers shuts both listeners down, once.
func (s *Server) stopServers() {
	s.stopped.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		for _, srv := range []*dns.Server{s.udp, s.tcp} {
			if err := srv.ShutdownContext(ctx); err != nil {
				s.log.Debug("shutting down", "error", err)
			}
		}
		// A server that never started does not close what it was given.
		_ = s.udp.PacketConn.Close()
		_ = s.tcp.Listener.Close()
	})
}

// Addr returns the address the server listens on (host:port, the same
// port for UDP and TCP), or "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Close stops answering and following the hub, and waits until both
// listeners are closed. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	state := s.state
	s.state = 2
	cancel := s.cancel
	s.mu.Unlock()
	if state != 1 {
		return nil
	}
	cancel()
	s.wg.Wait()
	return nil
}

// bind opens UDP and TCP on addr with the same port.
func bind(addr string) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen %q: %w", addr, err)
	}
	for range bindAttempts {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("listen udp %s: %w", addr, err)
		}
		taddr := addr
		if port == "0" {
			taddr = net.JoinHostPort(host, strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port))
		}
		ln, err := net.Listen("tcp", taddr)
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if port != "0" || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, fmt.Errorf("listen tcp %s: %w", taddr, err)
		}
	}
	return nil, nil, fmt.Errorf("listen %s: no port free on both UDP and TCP after %d attempts", addr, bindAttempts)
}
