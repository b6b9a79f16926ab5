package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/vigilcdn/vigil/plugins/node/internal/labels"
	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/sdk"
)

// Version is the plugin's version, reported by Info and sent by nodes.
const Version = "0.1.0"

// Source is the node gateway vote source. Use New; call Close when done
// (the plugin process simply exits).
type Source struct {
	log    hclog.Logger
	getenv func(string) string
	reg    *registry
	round  atomic.Uint64

	mu       sync.Mutex
	st       settings
	grpc     *grpc.Server
	addr     net.Addr
	status   *http.Server
	statusLn net.Listener
}

// New returns a Source that is not listening yet: Configure starts it.
func New(log hclog.Logger) *Source {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Source{log: log, getenv: os.Getenv, st: settings{onlineTimeout: DefaultOnlineTimeout, forgetAfter: DefaultForgetAfter, nodesPerRound: DefaultNodesPerRound}}
	s.reg = newRegistry(log, func() time.Duration { return s.settings().onlineTimeout }, func() time.Duration { return s.settings().forgetAfter })
	return s
}

func (s *Source) settings() settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// Info implements sdk.BasePlugin.
func (s *Source) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "vigil-source-node", Version: Version}, nil
}

// ConfigSchema implements sdk.BasePlugin.
func (s *Source) ConfigSchema(context.Context) (sdk.Schema, error) { return schema(), nil }

// Configure implements sdk.BasePlugin: it checks the configuration and
// starts listening for nodes (and for status requests, with status_listen).
// Configured again, it restarts the listeners with the new settings.
func (s *Source) Configure(_ context.Context, cfg sdk.Config) error {
	st, err := parseConfig(cfg, s.getenv)
	if err != nil {
		return err
	}
	s.Close()
	ln, err := net.Listen("tcp", st.listen)
	if err != nil {
		return sdk.Diagnostics{sdk.AttributeError("listen", "Cannot listen for nodes",
			fmt.Sprintf("%v: pick a free address or stop what holds it.", err))}
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.StreamInterceptor(authorize(st.token)),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: st.onlineTimeout, Timeout: st.onlineTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
	}
	if st.tlsConfig != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(st.tlsConfig)))
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterNodeGatewayServer(srv, &gatewayServer{log: s.log, reg: s.reg, settings: s.settings})

	var statusSrv *http.Server
	var statusLn net.Listener
	if st.statusListen != "" {
		statusLn, err = net.Listen("tcp", st.statusListen)
		if err != nil {
			_ = ln.Close()
			return sdk.Diagnostics{sdk.AttributeError("status_listen", "Cannot listen for status requests",
				fmt.Sprintf("%v: pick a free address or leave status_listen out.", err))}
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /v1/nodes", s.serveNodes)
		statusSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	}

	s.mu.Lock()
	s.st, s.grpc, s.addr, s.status, s.statusLn = st, srv, ln.Addr(), statusSrv, statusLn
	s.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil {
			s.log.Error("node listener stopped", "error", err)
		}
	}()
	if statusSrv != nil {
		go func() {
			if err := statusSrv.Serve(statusLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("status listener stopped", "error", err)
			}
		}()
	}
	auth := "token"
	switch {
	case st.mtls && st.token != nil:
		auth = "mTLS and token"
	case st.mtls:
		auth = "mTLS"
	case st.tlsConfig != nil:
		auth = "TLS and token"
	}
	s.log.Info("listening for nodes", "address", ln.Addr().String(), "auth", auth,
		"nodes_per_round", st.nodesPerRound, "online_timeout", st.onlineTimeout.String(), "forget_after", st.forgetAfter.String(), "status", st.statusListen)
	return nil
}

// Addr returns the address nodes attach to, or nil before Configure.
func (s *Source) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// StatusAddr returns the status listener's address, or nil.
func (s *Source) StatusAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statusLn == nil {
		return nil
	}
	return s.statusLn.Addr()
}

// Close stops the listeners and ends every node's stream.
func (s *Source) Close() {
	s.mu.Lock()
	srv, statusSrv := s.grpc, s.status
	s.grpc, s.status, s.statusLn, s.addr = nil, nil, nil, nil
	s.mu.Unlock()
	if statusSrv != nil {
		_ = statusSrv.Close()
	}
	if srv != nil {
		srv.Stop()
	}
}

// NodeStatus describes one node: attached, or offline and not forgotten
// yet (see forget_after and MaxOfflineNodes).
type NodeStatus struct {
	ID     string            `json:"id"`
	Labels map[string]string `json:"labels"`
	Online bool              `json:"online"`
	// State is "online" or "offline".
	State        string    `json:"state"`
	Remote       string    `json:"remote"`
	AgentVersion string    `json:"agent_version"`
	Since        time.Time `json:"since"` // attached since, on the node's last connection
	LastSeen     time.Time `json:"last_seen"`
	// OfflineSince is when an offline node went offline (zero when online).
	OfflineSince time.Time `json:"offline_since,omitzero"`
	// OfflineReason says why, in a few words: "stream ended",
	// "heartbeat timeout" or "replaced".
	OfflineReason string `json:"offline_reason,omitempty"`
	// OfflineDetail says what exactly happened, such as "node closed the
	// connection".
	OfflineDetail string `json:"offline_detail,omitempty"`
}

// Nodes lists the nodes, sorted by id: the attached ones and those that
// went offline less than forget_after ago. A node is offline once its
// stream ended, or while its stream is still open but it missed its
// heartbeats for online_timeout. A node offline for forget_after is
// forgotten, and logged, at the first round, detach or call of Nodes after
// that.
func (s *Source) Nodes() []NodeStatus { return s.reg.list() }

// Changed returns a channel that is closed at the next attach or detach,
// or when offline nodes are forgotten.
func (s *Source) Changed() <-chan struct{} {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	return s.reg.changed
}

// serveNodes answers GET /v1/nodes on status_listen as vigil's own
// GET /v1/nodes splits the Status items: the online nodes under "nodes",
// the offline ones (not forgotten yet) under "offline".
func (s *Source) serveNodes(w http.ResponseWriter, _ *http.Request) {
	online, offline := []NodeStatus{}, []NodeStatus{}
	for _, n := range s.Nodes() {
		if n.Online {
			online = append(online, n)
		} else {
			offline = append(offline, n)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Online  int          `json:"online"`
		Nodes   []NodeStatus `json:"nodes"`
		Offline []NodeStatus `json:"offline"`
	}{len(online), online, offline})
}

// Vote implements sdk.VoteSource. For each target it picks up to
// nodes_per_round online nodes (those carrying the site's labels), sends
// each chosen node one batch with all its jobs, and waits until every batch
// is answered, its node went away, or the deadline (a little before ctx's).
// Each answered job is one vote with the node id as voter.
func (s *Source) Vote(ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, error) {
	ctx, cancel := softDeadline(ctx)
	defer cancel()
	st := s.settings()
	round := s.round.Add(1)
	online := s.reg.online()
	if len(online) == 0 {
		s.log.Warn("no node online: the node source abstains this round", "round", ballot.Round, "targets", len(ballot.Targets))
		return nil, nil
	}

	plan := assign(round, ballot.Targets, online, st.nodesPerRound, st.siteLabels)
	budget := time.Duration(0)
	if dl, ok := ctx.Deadline(); ok {
		budget = time.Until(dl)
	}
	answers := make(chan answer, len(plan))
	targetsOf := make(map[uint64][]int, len(plan))
	nodeOf := make(map[uint64]string, len(plan))
	var ids []uint64
	for _, work := range plan {
		batch := &pb.Batch{Round: ballot.Round, BudgetMs: budget.Milliseconds(), Jobs: make([]*pb.ProbeJob, len(work.targets))}
		for i, ti := range work.targets {
			batch.Jobs[i] = job(&ballot.Targets[ti])
		}
		batch.BatchId = s.reg.expect(work.node, answers)
		ids = append(ids, batch.BatchId)
		select {
		case work.node.out <- &pb.GatewayMessage{Msg: &pb.GatewayMessage_Batch{Batch: batch}}:
			targetsOf[batch.BatchId] = work.targets
			nodeOf[batch.BatchId] = work.node.id
		default:
			s.log.Warn("node is not reading its stream: skipped this round", "node", work.node.id)
		}
	}
	defer s.reg.forget(ids)

	var votes []sdk.Vote
	var missing []string
wait:
	for len(targetsOf) > 0 {
		select {
		case a := <-answers:
			targets, ok := targetsOf[a.batch]
			if !ok {
				continue // a batch that could not be sent
			}
			delete(targetsOf, a.batch)
			if a.results == nil {
				missing = append(missing, a.node.id)
				continue
			}
			votes = append(votes, toVotes(a.node.id, ballot.Targets, targets, a.results)...)
		case <-ctx.Done():
			for id := range targetsOf {
				missing = append(missing, nodeOf[id])
			}
			break wait
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		s.log.Warn("nodes gave no answer this round", "round", ballot.Round, "nodes", missing)
	}
	s.log.Debug("round done", "round", ballot.Round, "online", len(online), "targets", len(ballot.Targets), "votes", len(votes))
	return votes, nil
}

func sortNodes(ns []NodeStatus) {
	sort.Slice(ns, func(i, j int) bool { return ns[i].ID < ns[j].ID })
}

// work is one node's share of a round.
type work struct {
	node    *conn
	targets []int // indexes into the ballot's targets
}

// assign chooses, for every target, up to k of the eligible online nodes
// (sorted by id). The choice is a window of k consecutive nodes whose start
// moves by k every round, offset per origin: over ceil(n/k) rounds every
// eligible node gets work, and origins of one round spread over different
// nodes.
func assign(round uint64, targets []sdk.Target, online []*conn, k int, siteLabels map[string]labels.Set) []work {
	eligible := map[string][]*conn{}
	byNode := map[*conn]*work{}
	var order []*conn
	for i := range targets {
		t := &targets[i]
		nodes, ok := eligible[t.Site]
		if !ok {
			sel := siteLabels[t.Site]
			for _, c := range online {
				if sel.Matches(c.labels) {
					nodes = append(nodes, c)
				}
			}
			eligible[t.Site] = nodes
		}
		n := len(nodes)
		if n == 0 {
			continue
		}
		h := fnv.New64a()
		_, _ = h.Write([]byte(t.Site + "\x00" + t.Origin))
		start := (h.Sum64() + round*uint64(k)) % uint64(n)
		for j := 0; j < min(k, n); j++ {
			c := nodes[(start+uint64(j))%uint64(n)]
			w, ok := byNode[c]
			if !ok {
				w = &work{node: c}
				byNode[c] = w
				order = append(order, c)
			}
			w.targets = append(w.targets, i)
		}
	}
	out := make([]work, len(order))
	for i, c := range order {
		out[i] = *byNode[c]
	}
	return out
}

func job(t *sdk.Target) *pb.ProbeJob {
	j := &pb.ProbeJob{Address: t.Address, Host: t.Host, Path: t.Path, TimeoutNs: int64(t.Timeout), UserAgent: t.UserAgent,
		ExpectedBody: t.Expect.BodyContains, MaxLatencyNs: int64(t.Expect.MaxLatency)}
	for _, st := range t.Expect.Statuses {
		j.ExpectedStatuses = append(j.ExpectedStatuses, int32(st))
	}
	return j
}

// toVotes turns a node's results into votes: one per job it ran.
func toVotes(node string, all []sdk.Target, targets []int, res *pb.BatchResult) []sdk.Vote {
	seen := make(map[uint32]bool, len(res.GetResults()))
	var votes []sdk.Vote
	for _, r := range res.GetResults() {
		if int(r.GetJob()) >= len(targets) || seen[r.GetJob()] {
			continue // garbage or a duplicate: ignored
		}
		seen[r.GetJob()] = true
		t := &all[targets[r.GetJob()]]
		reason, ok := sdk.ParseReason(r.GetReason())
		if !ok {
			reason = sdk.ReasonError
		}
		v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: node, Value: sdk.Down, Reason: reason,
			Detail: clip(r.GetDetail()), Latency: time.Duration(r.GetLatencyNs())}
		if r.GetUp() {
			v.Value = sdk.Up
		}
		votes = append(votes, v)
	}
	return votes
}

// softDeadline ends waiting a little before the call's deadline (a tenth
// of the time left, at most a second) so that the votes received get back
// to vigil in time.
func softDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	margin := min(time.Until(dl)/10, time.Second)
	return context.WithDeadline(ctx, dl.Add(-margin))
}
