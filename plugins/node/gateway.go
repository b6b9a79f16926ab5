package node

import (
	"container/list"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/vigilcdn/vigil/plugins/node/internal/labels"
	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/sdk"
)

// ProtocolVersion is the gateway protocol version nodes must speak.
const ProtocolVersion = 1

// The protocol features of nodegateway.proto beyond its first release:
// nodes announce them in their hello, the gateway in its welcome.
const (
	// featureProbeSettings: the node runs a job's TLS, header, redirect
	// and body-cap settings, with the batch's CA bundles.
	featureProbeSettings = "probe_settings"
	// featureNotRun: the gateway reads ProbeResult.not_run (and the node
	// sends it).
	featureNotRun = "not_run"
	// featurePassive: the node sends its passive windows in
	// ProbeResult.passive; the gateway announces it only with
	// passive_votes = true, and casts the passive votes.
	featurePassive = "passive"
	// featurePassiveTrigger: the gateway reads PassiveReport, a node's
	// failing passive windows sent between rounds; it announces it with
	// passive_votes and passive_trigger.
	featurePassiveTrigger = "passive_trigger"
)

// MaxMessageSize bounds one gateway message (a batch or its results).
const MaxMessageSize = 16 << 20

// MaxOfflineNodes bounds the offline nodes the gateway remembers. Past it
// the node that went offline first is forgotten first, so that a flapping
// fleet, or one that churns through node ids, cannot grow the gateway's
// memory without bound (an entry is a few hundred bytes).
const MaxOfflineNodes = 10000

// Why a node went offline, as its status says.
const (
	offlineStreamEnded = "stream ended"      // the node closed its stream, or the connection broke
	offlineHeartbeat   = "heartbeat timeout" // no message for online_timeout
	offlineReplaced    = "replaced"          // a new connection took its id after it missed heartbeats
)

// conn is one attached node.
type conn struct {
	id      string
	labels  map[string]string
	version string
	remote  string
	since   time.Time
	// probeSettings says the node announced featureProbeSettings: it may
	// get jobs that use the targets' TLS, header, redirect and body settings.
	probeSettings bool
	// passive says the node announced featurePassive: it keeps passive
	// windows (it proxies) and sends them to a gateway announcing it.
	passive bool
	seen    atomic.Int64 // unix nanoseconds of the last message
	out     chan *pb.GatewayMessage
	done    chan struct{} // closed when the stream ended

	// unsolicited counts the heartbeats, passive reports and other
	// messages that answer no batch read from the node; dropped, those of
	// them dropped over the node's limit.
	unsolicited, dropped atomic.Uint64
}

func (c *conn) lastSeen() time.Time { return time.Unix(0, c.seen.Load()) }

// gone is a node that went offline, remembered until forget_after (or
// until MaxOfflineNodes newer ones push it out) so that status shows it.
type gone struct {
	id      string
	labels  map[string]string
	version string
	remote  string
	since   time.Time // attached since, on its last connection
	seen    time.Time // last heard from
	at      time.Time // went offline
	why     string    // offlineStreamEnded, offlineHeartbeat or offlineReplaced
	detail  string    // what exactly happened, e.g. "node closed the connection"
	elem    *list.Element
}

// pending is a batch sent to a node and not answered yet.
type pending struct {
	node    *conn
	answers chan<- answer
}

// answer is a node's answer to a batch; results is nil when the node went
// away before answering.
type answer struct {
	batch   uint64
	node    *conn
	results *pb.BatchResult
}

// registry tracks the attached nodes, the batches they owe, and the nodes
// that went offline and are not forgotten yet.
type registry struct {
	log         hclog.Logger
	timeout     func() time.Duration
	forgetAfter func() time.Duration
	now         func() time.Time // time.Now; tests set a clock of their own before Configure
	maxOffline  int              // MaxOfflineNodes; tests lower it

	mu      sync.Mutex
	nodes   map[string]*conn
	offline map[string]*gone // by node id; never an id in nodes
	order   *list.List       // the *gone of offline, oldest first
	batches map[uint64]pending
	changed chan struct{} // closed and replaced on every attach, detach and forgetting
	nextID  uint64
}

func newRegistry(log hclog.Logger, timeout, forgetAfter func() time.Duration) *registry {
	return &registry{log: log, timeout: timeout, forgetAfter: forgetAfter, now: time.Now, maxOffline: MaxOfflineNodes,
		nodes: map[string]*conn{}, offline: map[string]*gone{}, order: list.New(), batches: map[uint64]pending{}, changed: make(chan struct{})}
}

// attach registers c, refusing an id whose holder is still online. An
// offline node of that id (detached, or attached but silent for
// online_timeout) gives way: the node is back, as one entry.
func (r *registry) attach(c *conn) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.nodes[c.id]; ok {
		if r.now().Sub(old.lastSeen()) < r.timeout() {
			return status.Errorf(codes.AlreadyExists,
				"node id %q is already attached from %s: give each node its own -id (a node that lost its connection gets back in within online_timeout)", c.id, old.remote)
		}
		r.dropLocked(old, offlineReplaced, "by a new connection from "+c.remote+" after missing heartbeats")
	}
	var away time.Duration
	if g, ok := r.offline[c.id]; ok {
		away = r.now().Sub(g.at)
		r.unrememberLocked(g)
	}
	r.nodes[c.id] = c
	r.notifyLocked()
	args := []any{"node", c.id, "labels", labels.Set(c.labels).String(), "remote", c.remote, "agent_version", c.version, "online", len(r.nodes)}
	if away > 0 {
		args = append(args, "offline_for", away.Round(time.Millisecond).String())
	}
	r.log.Info("node online", args...)
	return nil
}

// detach removes c (if still registered), fails its pending batches and
// remembers it as offline for why (offlineStreamEnded, offlineHeartbeat),
// detail saying what happened.
func (r *registry) detach(c *conn, why, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.nodes[c.id] != c {
		return
	}
	r.dropLocked(c, why, detail)
	g := &gone{id: c.id, labels: c.labels, version: c.version, remote: c.remote, since: c.since, seen: c.lastSeen(),
		at: r.now(), why: why, detail: detail}
	g.elem = r.order.PushBack(g)
	r.offline[c.id] = g
	for r.order.Len() > r.maxOffline {
		old := r.order.Front().Value.(*gone)
		r.unrememberLocked(old)
		r.log.Info("node forgotten: too many nodes offline", "node", old.id, "max_offline", r.maxOffline,
			"last_seen", old.seen.UTC().Format(time.RFC3339))
	}
	r.pruneLocked()
}

func (r *registry) dropLocked(c *conn, why, detail string) {
	delete(r.nodes, c.id)
	for id, p := range r.batches {
		if p.node == c {
			p.answers <- answer{batch: id, node: c}
			delete(r.batches, id)
		}
	}
	r.notifyLocked()
	r.log.Info("node offline", "node", c.id, "reason", why, "detail", detail, "online", len(r.nodes))
}

func (r *registry) unrememberLocked(g *gone) {
	r.order.Remove(g.elem)
	delete(r.offline, g.id)
}

// pruneLocked forgets the nodes offline for forget_after, logging each
// once.
func (r *registry) pruneLocked() {
	after := r.forgetAfter()
	limit := r.now().Add(-after)
	forgot := false
	for e := r.order.Front(); e != nil; e = r.order.Front() {
		g := e.Value.(*gone)
		if g.at.After(limit) {
			break
		}
		r.unrememberLocked(g)
		forgot = true
		r.log.Info("node forgotten after "+shortDuration(after)+" offline", "node", g.id,
			"last_seen", g.seen.UTC().Format(time.RFC3339), "offline_since", g.at.UTC().Format(time.RFC3339))
	}
	if forgot {
		r.notifyLocked()
	}
}

func (r *registry) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// online returns the nodes heard from within the timeout, sorted by id.
// Offline nodes are never among them: only attached ones are looked at.
// It also forgets the nodes offline for forget_after, so that forgetting
// happens at least once a round.
func (r *registry) online() []*conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	limit := r.now().Add(-r.timeout())
	out := make([]*conn, 0, len(r.nodes))
	for _, id := range slices.Sorted(maps.Keys(r.nodes)) {
		if c := r.nodes[id]; c.lastSeen().After(limit) {
			out = append(out, c)
		}
	}
	return out
}

// list describes every node known, online or offline, sorted by id.
func (r *registry) list() []NodeStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	now, timeout := r.now(), r.timeout()
	out := make([]NodeStatus, 0, len(r.nodes)+len(r.offline))
	for _, c := range r.nodes {
		seen := c.lastSeen()
		n := NodeStatus{ID: c.id, Labels: c.labels, Online: seen.After(now.Add(-timeout)), State: "online", Remote: c.remote,
			AgentVersion: c.version, Since: c.since, LastSeen: seen, HeartbeatsDropped: c.dropped.Load()}
		if !n.Online {
			n.State, n.OfflineSince, n.OfflineReason = "offline", seen.Add(timeout), offlineHeartbeat
			n.OfflineDetail = "no heartbeat within online_timeout " + timeout.String() + ", stream still open"
		}
		out = append(out, n)
	}
	for _, g := range r.offline {
		out = append(out, NodeStatus{ID: g.id, Labels: g.labels, State: "offline", Remote: g.remote, AgentVersion: g.version,
			Since: g.since, LastSeen: g.seen, OfflineSince: g.at, OfflineReason: g.why, OfflineDetail: g.detail})
	}
	sortNodes(out)
	return out
}

// shortDuration writes d without trailing zero units: 24h, 1h30m, 10m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// expect registers a batch for c whose answer goes to answers.
func (r *registry) expect(c *conn, answers chan<- answer) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	r.batches[r.nextID] = pending{node: c, answers: answers}
	return r.nextID
}

// forget drops batches that will not be waited for any more.
func (r *registry) forget(ids []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		delete(r.batches, id)
	}
}

// deliver hands a node's result to the round waiting for it. Results for
// batches of another node, or that nobody waits for (late), are dropped.
func (r *registry) deliver(c *conn, res *pb.BatchResult) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.batches[res.GetBatchId()]
	if !ok || p.node != c {
		return false
	}
	delete(r.batches, res.GetBatchId())
	p.answers <- answer{batch: res.GetBatchId(), node: c, results: res}
	return true
}

// gatewayServer is the NodeGateway gRPC service.
type gatewayServer struct {
	pb.UnimplementedNodeGatewayServer
	log      hclog.Logger
	reg      *registry
	settings func() settings
	guard    *guard
	// report handles a node's PassiveReport (the passive trigger).
	report func(*conn, *pb.PassiveReport)
}

// authorize checks the shared token of every call, after refusing an
// address that is cut off for failing too often (guard.cutOff). A wrong
// token is a failed attempt of the address.
func authorize(token []byte, gd *guard) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		key, remote := remoteKey(ss.Context())
		if err := gd.cutOff(key); err != nil {
			return err
		}
		if token != nil {
			md, _ := metadata.FromIncomingContext(ss.Context())
			got := ""
			if v := md.Get("authorization"); len(v) == 1 {
				got, _ = strings.CutPrefix(v[0], "Bearer ")
			}
			if subtle.ConstantTimeCompare([]byte(got), token) != 1 {
				detail := "wrong token"
				if got == "" {
					detail = "no token"
				}
				gd.refuse(key, remote, "", refusedWrongToken, detail, true)
				return status.Error(codes.Unauthenticated,
					"the gateway refused this node's token: start vigil-node with -token-env naming a variable that holds the gateway's token (its token_env)")
			}
		}
		return handler(srv, ss)
	}
}

// remoteKey returns the address (guard's peerKey) of a call's peer, and
// its connection's own address.
func remoteKey(ctx context.Context) (key, remote string) {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return peerKey(p.Addr), p.Addr.String()
	}
	return "unknown", ""
}

// errFlood ends a stream whose node sends heartbeats far over the limit.
var errFlood = errors.New("heartbeat flood")

// recvHello waits up to timeout (none when the limits are off) for the
// stream's first message.
func (g *gatewayServer) recvHello(stream grpc.BidiStreamingServer[pb.NodeMessage, pb.GatewayMessage], timeout time.Duration) (*pb.NodeMessage, error) {
	if g.guard.off {
		return stream.Recv()
	}
	type recvd struct {
		m   *pb.NodeMessage
		err error
	}
	got := make(chan recvd, 1)
	go func() { // ends with the stream when the deadline returns first
		m, err := stream.Recv()
		got <- recvd{m, err}
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case r := <-got:
		return r.m, r.err
	case <-deadline.C:
		return nil, errHelloTimeout
	}
}

// errHelloTimeout: a stream sent no hello within hello_timeout.
var errHelloTimeout = errors.New("no hello within hello_timeout")

func (g *gatewayServer) Attach(stream grpc.BidiStreamingServer[pb.NodeMessage, pb.GatewayMessage]) error {
	ctx := stream.Context()
	st := g.settings()
	key, remoteAddr := remoteKey(ctx)
	first, err := g.recvHello(stream, st.helloTimeout)
	if errors.Is(err, errHelloTimeout) {
		g.guard.refuse(key, remoteAddr, "", refusedHelloTimeout, "no hello within hello_timeout "+st.helloTimeout.String(), true)
		return status.Errorf(codes.DeadlineExceeded, "no hello within hello_timeout %s: a node must say hello as soon as its stream is open (is this a vigil-node?)", st.helloTimeout)
	}
	if err != nil {
		return err
	}
	// refuse counts and logs a refusal; failure says it is a failed
	// attempt of the address (see guard.refuse).
	refuse := func(reason string, failure bool, err error) error {
		g.guard.refuse(key, remoteAddr, clip(first.GetHello().GetNodeId()), reason, status.Convert(err).Message(), failure)
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return refuse(refusedBadHello, true, status.Error(codes.InvalidArgument, "the first message must be a hello"))
	}
	if hello.GetProtocolVersion() != ProtocolVersion {
		return refuse(refusedBadHello, false, status.Errorf(codes.FailedPrecondition, "the node speaks gateway protocol %d, the gateway %d: run the same vigil release on both", hello.GetProtocolVersion(), ProtocolVersion))
	}
	if !sdk.ValidVoter(hello.GetNodeId()) {
		return refuse(refusedBadHello, true, status.Errorf(codes.InvalidArgument, "node id %q is invalid: use 1 to 128 letters, digits and ._:-@/", clip(hello.GetNodeId())))
	}
	if err := labels.Check(hello.GetLabels()); err != nil {
		return refuse(refusedBadHello, true, status.Errorf(codes.InvalidArgument, "node %q labels: %v", hello.GetNodeId(), err))
	}
	remote := "unknown"
	if p, ok := peer.FromContext(ctx); ok {
		remote = p.Addr.String()
		if st.mtls {
			if err := certNames(p, hello.GetNodeId()); err != nil {
				return refuse(refusedBadCert, true, status.Errorf(codes.PermissionDenied, "node %q: %v", hello.GetNodeId(), err))
			}
		}
	}
	c := &conn{
		id: hello.GetNodeId(), labels: hello.GetLabels(), version: hello.GetAgentVersion(), remote: remote,
		since: g.reg.now(), out: make(chan *pb.GatewayMessage, 4), done: make(chan struct{}),
		probeSettings: slices.Contains(hello.GetFeatures(), featureProbeSettings),
		passive:       slices.Contains(hello.GetFeatures(), featurePassive),
	}
	c.seen.Store(c.since.UnixNano())
	if err := g.reg.attach(c); err != nil {
		return refuse(refusedDuplicate, false, err)
	}
	why, reason := offlineStreamEnded, "stream ended"
	defer func() { close(c.done); g.reg.detach(c, why, reason) }()

	features := []string{featureNotRun}
	if st.passive {
		features = append(features, featurePassive)
	}
	if st.trigger {
		features = append(features, featurePassiveTrigger)
	}
	w := &pb.Welcome{HeartbeatIntervalMs: (st.onlineTimeout / 3).Milliseconds(), Features: features}
	if st.trigger { // nodes report only the windows that trip the rule
		w.PassiveMinRequests, w.PassiveFailureRatio = uint32(st.passiveMinRequests), st.passiveFailureRatio
	}
	welcome := &pb.GatewayMessage{Msg: &pb.GatewayMessage_Welcome{Welcome: w}}
	if err := stream.Send(welcome); err != nil {
		reason = "send failed"
		return err
	}

	recvErr := make(chan error, 1)
	go func() {
		hb := newHeartbeatLimit(st.onlineTimeout)
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			res := m.GetResult()
			if res != nil && g.reg.deliver(c, res) {
				c.seen.Store(g.reg.now().UnixNano())
				continue
			}
			// A heartbeat, a passive report, a late or unknown result, or
			// a message this release does not know: unsolicited, so
			// limited.
			g.guard.heartbeats.Add(1)
			c.unsolicited.Add(1)
			now := g.reg.now()
			if !g.guard.off {
				ok, flood := hb.admit(now, m.GetPassiveReport() != nil)
				if !ok {
					g.guard.dropped.Add(1)
					c.dropped.Add(1)
					if flood {
						recvErr <- errFlood
						return
					}
					continue
				}
			}
			c.seen.Store(now.UnixNano())
			if res != nil {
				g.log.Debug("late or unknown batch result dropped", "node", c.id, "batch", res.GetBatchId())
			}
			if rep := m.GetPassiveReport(); rep != nil && g.report != nil {
				g.report(c, rep)
			}
		}
	}()
	check := time.NewTicker(st.onlineTimeout / 3)
	defer check.Stop()
	for {
		select {
		case m := <-c.out:
			if err := stream.Send(m); err != nil {
				reason = "send failed"
				return err
			}
		case err := <-recvErr:
			if errors.Is(err, errFlood) {
				limit := fmt.Sprintf("%d per online_timeout %s, bursts of %d", HeartbeatsPerTimeout, st.onlineTimeout, HeartbeatBurst)
				reason = "closed by the gateway: heartbeats far over the limit of " + limit
				g.guard.refuse(key, remoteAddr, c.id, refusedFlood, "heartbeats far over the limit of "+limit, true)
				return status.Errorf(codes.ResourceExhausted, "the node sent heartbeats far over the limit of %s (vigil-node sends 3 per online_timeout): the gateway closed its stream", limit)
			}
			if errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
				reason = "node closed the connection"
			} else {
				reason = fmt.Sprintf("receive: %v", err)
			}
			return nil
		case <-check.C:
			if since := g.reg.now().Sub(c.lastSeen()); since > st.onlineTimeout {
				why, reason = offlineHeartbeat, fmt.Sprintf("no heartbeat for %s", since.Round(time.Millisecond))
				return status.Errorf(codes.DeadlineExceeded, "no heartbeat for %s (online_timeout %s)", since.Round(time.Millisecond), st.onlineTimeout)
			}
		case <-ctx.Done():
			reason = "connection lost"
			return ctx.Err()
		}
	}
}

// certNames checks that the node's client certificate names id (as its
// common name or one of its DNS names), so that a node cannot vote under
// another node's id.
func certNames(p *peer.Peer, id string) error {
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return errors.New("no verified client certificate: the gateway requires mTLS (client_ca_file)")
	}
	leaf := ti.State.VerifiedChains[0][0]
	if leaf.Subject.CommonName == id || slices.Contains(leaf.DNSNames, id) {
		return nil
	}
	return fmt.Errorf("the client certificate (CN %q) does not name this node id: issue the node a certificate with CN or DNS name %q", leaf.Subject.CommonName, id)
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
