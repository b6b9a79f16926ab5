package node

import (
	"container/list"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// The gateway under abuse: how long a stream may take to say hello, how
// fast a node may send heartbeats, how many failed attempts an address may
// make before it is cut off, and how much the gateway remembers about the
// addresses it refused.
const (
	// DefaultHelloTimeout is how long a new stream may take to send its
	// hello (hello_timeout). vigil-node sends it as soon as the stream is
	// open, after the TLS handshake, so a node needs a round trip or two.
	DefaultHelloTimeout = 10 * time.Second
	// MaxPeers bounds the addresses the gateway keeps refusal state for
	// (failed attempts, cut-off, log suppression); past it the least
	// recently refused address is forgotten first.
	MaxPeers = 10000
	// AuthFailureBurst is how many failed attempts (wrong token, bad
	// certificate name, malformed hello, no hello in time, heartbeat flood)
	// an address may make in a row; one more is allowed every
	// AuthFailureEvery. Past that the address is cut off for AuthBackoff.
	AuthFailureBurst = 5
	// AuthFailureEvery is how often an address earns back one failed attempt.
	AuthFailureEvery = 10 * time.Second
	// AuthBackoff is how long an address that failed too often is refused
	// without its credentials being looked at.
	AuthBackoff = time.Minute
	// RefusalLogInterval: the gateway logs a refused address at most once
	// per interval, with a count of the refusals it did not log.
	RefusalLogInterval = time.Minute
	// HeartbeatsPerTimeout is how many heartbeats (and late or unknown
	// batch results) a node may send per online_timeout, with a burst of
	// HeartbeatBurst; vigil-node sends 3. Excess ones are dropped, not
	// processed.
	HeartbeatsPerTimeout = 30
	// HeartbeatBurst is how many heartbeats a node may send at once.
	HeartbeatBurst = 20
	// PassiveReportsPerSecond is how many passive reports (the passive
	// trigger) a node may send per second, with a burst of
	// PassiveReportBurst; vigil-node sends at most 4 (one per 250ms poll).
	// Excess ones are dropped like heartbeats.
	PassiveReportsPerSecond = 10
	// PassiveReportBurst is how many passive reports a node may send at once.
	PassiveReportBurst = 20
	// MaxDroppedHeartbeats: a node whose dropped heartbeats and passive
	// reports outrun both rates together by this many is disconnected
	// (ResourceExhausted) and its address charged one failed attempt.
	MaxDroppedHeartbeats = 200
)

// Why the gateway refused a stream, as its counters and log lines say.
const (
	refusedHelloTimeout = "hello_timeout"   // no hello within hello_timeout
	refusedWrongToken   = "wrong_token"     // missing or wrong token
	refusedBadCert      = "bad_certificate" // no client certificate, one client_ca_file did not sign, or one not naming the node id
	refusedBadHello     = "bad_hello"       // not a hello, wrong protocol, invalid id or labels
	refusedCutOff       = "cut_off"         // the address failed too often and is refused for a while
	refusedFlood        = "heartbeat_flood" // heartbeats far faster than the limit
	refusedDuplicate    = "duplicate_id"    // the node id is attached from elsewhere
)

// bucket is a token bucket: it holds up to burst tokens and earns rate
// tokens per second. The zero bucket is full.
type bucket struct {
	tokens float64
	last   time.Time
}

// take spends one token at now, reporting whether there was one.
func (b *bucket) take(now time.Time, rate, burst float64) bool {
	if b.last.IsZero() {
		b.tokens = burst
	} else if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(burst, b.tokens+el*rate)
	}
	if now.After(b.last) {
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}

// peerState is what the gateway remembers about one refused address.
type peerState struct {
	key      string
	failures bucket    // failed attempts
	cutUntil time.Time // refused without a look until then
	logged   time.Time // last log line about it
	// suppressed counts, by reason, the refusals since the last log line.
	suppressed map[string]int
	elem       *list.Element
}

// guard keeps the gateway's abuse limits: per address (failed attempts,
// cut-off, one log line per interval) and the refusal counters.
type guard struct {
	log      func() hclog.Logger
	now      func() time.Time
	maxPeers int // MaxPeers; tests lower it
	// burst is AuthFailureBurst; tests raise it.
	burst float64
	// off turns every limit off (hello deadline, heartbeat rate, cut-off):
	// the benchmarks' baseline. Refusals are still counted and logged.
	off bool

	mu      sync.Mutex
	peers   map[string]*peerState
	order   *list.List // *peerState, least recently refused first
	refused map[string]uint64
	conns   map[string]*trackedConn // the open connections, by remote address

	heartbeats atomic.Uint64 // heartbeats and passive reports read
	dropped    atomic.Uint64 // of those, dropped over the rate
}

func newGuard(log func() hclog.Logger, now func() time.Time) *guard {
	return &guard{log: log, now: now, maxPeers: MaxPeers, burst: AuthFailureBurst, peers: map[string]*peerState{}, order: list.New(), refused: map[string]uint64{},
		conns: map[string]*trackedConn{}}
}

// peerKey is the address a remote is limited by: its IP, or for IPv6 its
// /64 (one host usually holds a whole /64).
func peerKey(remote net.Addr) string {
	if remote == nil {
		return "unknown"
	}
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		host, _, err := net.SplitHostPort(remote.String())
		if err != nil {
			return remote.String()
		}
		return host
	}
	ip := ap.Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// peerLocked returns key's state, creating it (and forgetting the least
// recently refused address past maxPeers).
func (g *guard) peerLocked(key string) *peerState {
	if p, ok := g.peers[key]; ok {
		g.order.MoveToBack(p.elem)
		return p
	}
	p := &peerState{key: key, suppressed: map[string]int{}}
	p.elem = g.order.PushBack(p)
	g.peers[key] = p
	for g.order.Len() > g.maxPeers {
		old := g.order.Remove(g.order.Front()).(*peerState)
		delete(g.peers, old.key)
	}
	return p
}

// cutOff returns the status error refusing key while it is cut off, or
// nil. The refusal is counted and logged as refusedCutOff.
func (g *guard) cutOff(key string) error {
	if g.off {
		return nil
	}
	now := g.now()
	g.mu.Lock()
	p, ok := g.peers[key]
	if !ok || !now.Before(p.cutUntil) {
		g.mu.Unlock()
		return nil
	}
	until := p.cutUntil
	g.mu.Unlock()
	left := until.Sub(now).Round(time.Second)
	g.refuse(key, "", "", refusedCutOff, "refused without a look: too many failed attempts", false)
	return status.Errorf(codes.ResourceExhausted,
		"the gateway refuses %s for %s after %d failed attempts (wrong token, certificate or hello): fix the node's credentials; it is let in again after that",
		key, max(left, time.Second), int(g.burst)+1)
}

// refuse counts a refusal of key (remote: the connection's own address,
// if known; node: the node id, if known) for reason and logs it, at most
// once per RefusalLogInterval per address (and once more when it is cut
// off); the next line says how many were not logged. A failed attempt
// (failure) spends one of the address's attempts; when it has none left
// it is cut off for AuthBackoff. While it is cut off, the connections it
// failed on are closed.
func (g *guard) refuse(key, remote, node, reason, detail string, failure bool) {
	now := g.now()
	g.mu.Lock()
	g.refused[reason]++
	p := g.peerLocked(key)
	cut := false
	var doomed []*trackedConn
	if failure && !g.off {
		if c := g.conns[remote]; c != nil {
			c.failed = true
		}
		if !p.failures.take(now, 1/AuthFailureEvery.Seconds(), g.burst) && !now.Before(p.cutUntil) {
			p.cutUntil = now.Add(AuthBackoff)
			cut = true
		}
		if now.Before(p.cutUntil) {
			for _, c := range g.conns {
				if c.failed && c.key == key {
					doomed = append(doomed, c)
				}
			}
		}
	}
	var args []any
	if p.logged.IsZero() || now.Sub(p.logged) >= RefusalLogInterval || cut {
		args = []any{"peer", key, "reason", reason, "detail", detail}
		if node != "" {
			args = append(args, "node", node)
		}
		if n := sum(p.suppressed); n > 0 {
			args = append(args, "suppressed", n, "suppressed_reasons", counts(p.suppressed), "since", p.logged.UTC().Format(time.RFC3339))
		}
		if cut {
			args = append(args, "cut_off_for", AuthBackoff.String())
		}
		p.logged = now
		clear(p.suppressed)
	} else {
		p.suppressed[reason]++
	}
	g.mu.Unlock()
	for _, c := range doomed {
		_ = c.Close()
	}
	if args == nil {
		return
	}
	msg := "node refused (logged once per " + shortDuration(RefusalLogInterval) + " per address)"
	if cut {
		msg = fmt.Sprintf("node refused; address cut off after %d failed attempts", int(g.burst)+1)
	}
	g.log().Warn(msg, args...)
}

// trackedConn is an open node connection. Its address loses it when it
// is cut off after a failed attempt on it.
type trackedConn struct {
	net.Conn
	g      *guard
	key    string // peerKey
	remote string
	failed bool // guarded by g.mu: a failed attempt came over it
	once   sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.g.mu.Lock()
		defer c.g.mu.Unlock()
		if c.g.conns[c.remote] == c {
			delete(c.g.conns, c.remote)
		}
	})
	return c.Conn.Close()
}

// listener wraps the gateway's listener: a connection from an address
// that is cut off is closed as soon as it is accepted, before its TLS
// handshake; the others are tracked.
func (g *guard) listener(ln net.Listener) net.Listener { return &guardedListener{Listener: ln, g: g} }

type guardedListener struct {
	net.Listener
	g *guard
}

func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := peerKey(c.RemoteAddr())
		if l.g.isCutOff(key) {
			l.g.refuse(key, "", "", refusedCutOff, "connection closed as soon as accepted: too many failed attempts", false)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // reset: no FIN exchange, no TIME_WAIT kept for it
			}
			_ = c.Close()
			continue
		}
		tc := &trackedConn{Conn: c, g: l.g, key: key, remote: c.RemoteAddr().String()}
		l.g.mu.Lock()
		l.g.conns[tc.remote] = tc
		l.g.mu.Unlock()
		return tc, nil
	}
}

// credentials wraps the gateway's TLS credentials: a TLS handshake that
// fails because the node's client certificate is missing or not signed by
// client_ca_file is a failed attempt (bad_certificate) of its address.
// Other handshake failures (a port scan, a dropped connection) are not
// counted.
func (g *guard) credentials(c credentials.TransportCredentials) credentials.TransportCredentials {
	return guardedCreds{TransportCredentials: c, g: g}
}

type guardedCreds struct {
	credentials.TransportCredentials
	g *guard
}

func (c guardedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	var verify *tls.CertificateVerificationError
	if err != nil && (errors.As(err, &verify) || strings.Contains(err.Error(), "didn't provide a certificate")) {
		detail := "TLS handshake: no client certificate"
		if verify != nil {
			detail = "TLS handshake: the client certificate is not signed by client_ca_file: " + verify.Err.Error()
		}
		c.g.refuse(peerKey(raw.RemoteAddr()), raw.RemoteAddr().String(), "", refusedBadCert, detail, true)
	}
	return conn, info, err
}

func (c guardedCreds) Clone() credentials.TransportCredentials {
	return guardedCreds{TransportCredentials: c.TransportCredentials.Clone(), g: c.g}
}

// isCutOff reports whether key is cut off now.
func (g *guard) isCutOff(key string) bool {
	if g.off {
		return false
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.peers[key]
	return ok && now.Before(p.cutUntil)
}

// counts returns the refusals counted since the gateway started, by reason.
func (g *guard) counts() map[string]uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.refused)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// counts writes m as "reason=n,reason=n", sorted by reason.
func counts[V int | uint64](m map[string]V) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

// heartbeatLimit is one node's limit on unsolicited messages: heartbeats
// (and late or unknown results, and messages this release does not know)
// at HeartbeatsPerTimeout per online_timeout, passive reports at
// PassiveReportsPerSecond. It is used by the stream's receive loop only.
type heartbeatLimit struct {
	rate    float64 // heartbeats per second
	allowed bucket
	reports bucket
	drops   bucket // drops the node may make before it is disconnected
}

func newHeartbeatLimit(onlineTimeout time.Duration) *heartbeatLimit {
	return &heartbeatLimit{rate: HeartbeatsPerTimeout / onlineTimeout.Seconds()}
}

// admit reports whether a message at now is processed (ok) and, when it
// is not, whether the node has dropped so many that it must go (flood).
// report says it is a passive report.
func (h *heartbeatLimit) admit(now time.Time, report bool) (ok, flood bool) {
	if report && h.reports.take(now, PassiveReportsPerSecond, PassiveReportBurst) || !report && h.allowed.take(now, h.rate, HeartbeatBurst) {
		return true, false
	}
	return false, !h.drops.take(now, h.rate+PassiveReportsPerSecond, MaxDroppedHeartbeats)
}
