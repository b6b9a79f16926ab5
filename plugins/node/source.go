package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
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
	trig   *triggers
	guard  *guard
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
	s.trig = newTriggers(log, func() time.Time { return s.reg.now() })
	s.guard = newGuard(func() hclog.Logger { return s.log }, func() time.Time { return s.reg.now() })
	return s
}

func (s *Source) settings() settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// Info implements sdk.BasePlugin. The nodes probe with sdk/probe, which
// honours every target setting; a node too old for them abstains with a
// reason (usesProbeSettings): the probe's capabilities.
func (s *Source) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "vigil-source-node", Version: Version, Capabilities: sdk.ProbeCapabilities()}, nil
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
		grpc.StreamInterceptor(authorize(st.token, s.guard)),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: st.onlineTimeout, Timeout: st.onlineTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
	}
	if !s.guard.off { // a connection must get to its first stream within hello_timeout too
		opts = append(opts, grpc.ConnectionTimeout(st.helloTimeout))
	}
	if st.tlsConfig != nil {
		opts = append(opts, grpc.Creds(s.guard.credentials(credentials.NewTLS(st.tlsConfig))))
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterNodeGatewayServer(srv, &gatewayServer{log: s.log, reg: s.reg, settings: s.settings, guard: s.guard, report: s.passiveReport})

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
		if err := srv.Serve(s.guard.listener(ln)); err != nil {
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
		"nodes_per_round", st.nodesPerRound, "online_timeout", st.onlineTimeout.String(), "forget_after", st.forgetAfter.String(), "hello_timeout", st.helloTimeout.String(), "status", st.statusListen)
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
	// HeartbeatsDropped counts, for an attached node, the heartbeats and
	// passive reports dropped over its limit on its current stream.
	HeartbeatsDropped uint64 `json:"heartbeats_dropped,omitempty"`
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
		// Refused counts the streams refused since the gateway started,
		// by reason (see Refusals).
		Refused           map[string]uint64 `json:"refused"`
		HeartbeatsDropped uint64            `json:"heartbeats_dropped"`
	}{len(online), online, offline, s.Refusals(), s.guard.dropped.Load()})
}

// Refusals counts the streams the gateway refused since it started, by
// reason: "wrong_token", "bad_certificate" (none, one client_ca_file did
// not sign, or one not naming the node id), "bad_hello" (not a hello, an
// invalid id or labels, another protocol version), "hello_timeout" (no
// hello within hello_timeout), "cut_off" (the address failed too often and
// is refused for AuthBackoff), "heartbeat_flood" (closed for sending
// heartbeats far over the limit) and "duplicate_id".
func (s *Source) Refusals() map[string]uint64 { return s.guard.counts() }

// GatewayVoter is the voter id of the gateway's own abstentions: those for
// targets that no node could look at (ReasonNoVoter), because no node is
// online or none carries the site's labels. Every other vote, abstentions
// included, names the node it is about.
const GatewayVoter = "node-gateway"

// Vote implements sdk.VoteSource. For each target it picks up to
// nodes_per_round online nodes (those carrying the site's labels), sends
// each chosen node one batch with all its jobs and, as its budget, the
// time left until the gateway's soft deadline (a little before ctx's), and
// waits until every batch is answered, its node went away, or that
// deadline. Every chosen node casts one vote per job, with the node id as
// voter: the node's verdict, or an Abstain when it gave none: out_of_time
// for a job the node reported not run or did not answer by the deadline,
// no_voter when the node went offline or could not take the batch,
// unsupported when the node predates the target's probe settings. A target
// no node could look at gets one Abstain no_voter from GatewayVoter.
func (s *Source) Vote(ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, error) {
	if len(ballot.Targets) == 0 {
		return nil, nil
	}
	ctx, cancel := sdk.SoftDeadline(ctx)
	defer cancel()
	soft, hasDeadline := ctx.Deadline()
	st := s.settings()
	round := s.round.Add(1)
	online := s.reg.online()
	if st.trigger {
		s.trig.learn(ballot.Targets)
		s.trig.flush(st.suspectInterval)
	}

	plan, unserved := assign(round, ballot.Targets, online, st.nodesPerRound, st.siteLabels)
	if st.passive {
		plan = addPassive(plan, ballot.Targets, online, st.siteLabels)
	}
	votes := make([]sdk.Vote, 0, len(ballot.Targets)*min(st.nodesPerRound, max(1, len(online))))
	if len(unserved) > 0 {
		sites := map[string]bool{}
		for _, ti := range unserved {
			t := &ballot.Targets[ti]
			why := "no node is online"
			if len(online) > 0 {
				why = fmt.Sprintf("no online node carries the labels of site %s (%s)", t.Site, st.siteLabels[t.Site])
			}
			sites[t.Site] = true
			votes = append(votes, abstain(t, GatewayVoter, sdk.ReasonNoVoter, why))
		}
		if len(online) == 0 {
			s.log.Warn("no node online: the node source abstains this round (no_voter)", "round", ballot.Round, "targets", len(ballot.Targets))
			return votes, nil
		}
		s.log.Warn("no online node carries the labels of some sites: abstaining for their targets (no_voter)",
			"round", ballot.Round, "targets", len(unserved), "sites", slices.Sorted(maps.Keys(sites)), "online", len(online))
	}

	answers := make(chan answer, len(plan))
	pending := make(map[uint64]work, len(plan)) // by batch id
	var ids []uint64
	defer func() { s.reg.forget(ids) }()
	var outdated []string // nodes too old for some targets' settings
	for _, w := range plan {
		sent := w.targets[:0:0]
		for _, ti := range w.targets {
			t := &ballot.Targets[ti]
			if !w.passiveOnly[ti] && !w.node.probeSettings && usesProbeSettings(t) {
				votes = append(votes, abstain(t, w.node.id, sdk.ReasonUnsupported,
					"the node's vigil-node ("+clip(w.node.version)+") predates the target's TLS, header, redirect or body settings: upgrade it"))
				continue
			}
			sent = append(sent, ti)
		}
		if len(sent) < len(w.targets) {
			outdated = append(outdated, w.node.id)
		}
		if len(sent) == 0 {
			continue
		}
		budget := time.Duration(0) // none: the node's default
		if hasDeadline {
			if budget = time.Until(soft); budget < time.Millisecond {
				votes = append(votes, w.abstainAll(ballot.Targets, sent, sdk.ReasonOutOfTime, "the round's deadline came before the batch could be sent")...)
				continue
			}
		}
		batch := &pb.Batch{Round: ballot.Round, BudgetMs: budget.Milliseconds(), Jobs: make([]*pb.ProbeJob, len(sent))}
		for i, ti := range sent {
			t := &ballot.Targets[ti]
			batch.Jobs[i] = job(t)
			if w.passiveOnly[ti] {
				batch.Jobs[i] = &pb.ProbeJob{Address: t.Address, Host: t.Host, PassiveOnly: true}
				continue
			}
			if name := t.TLS.CA; name != "" {
				if pem, ok := ballot.CAs[name]; ok {
					if batch.Cas == nil {
						batch.Cas = map[string][]byte{}
					}
					batch.Cas[name] = pem
				}
			}
		}
		batch.BatchId = s.reg.expect(w.node, answers)
		ids = append(ids, batch.BatchId)
		select {
		case w.node.out <- &pb.GatewayMessage{Msg: &pb.GatewayMessage_Batch{Batch: batch}}:
			pending[batch.BatchId] = work{node: w.node, targets: sent, passiveOnly: w.passiveOnly}
		default:
			s.log.Warn("node is not reading its stream: skipped this round", "node", w.node.id)
			votes = append(votes, w.abstainAll(ballot.Targets, sent, sdk.ReasonNoVoter, "the node is not reading its stream: its batch could not be sent")...)
		}
	}

	if len(outdated) > 0 {
		sort.Strings(outdated)
		s.log.Warn("nodes too old for some targets' TLS, header, redirect or body settings abstain on them (unsupported): upgrade their vigil-node",
			"round", ballot.Round, "nodes", outdated)
	}

	var late, gone []string
wait:
	for len(pending) > 0 {
		select {
		case a := <-answers:
			w, ok := pending[a.batch]
			if !ok {
				continue // a batch that could not be sent
			}
			delete(pending, a.batch)
			if a.results == nil {
				gone = append(gone, a.node.id)
				votes = append(votes, w.abstainAll(ballot.Targets, w.targets, sdk.ReasonNoVoter, "the node went offline before answering")...)
				continue
			}
			var rule *passiveRule
			if st.passive && a.node.passive {
				rule = &passiveRule{minRequests: st.passiveMinRequests, failureRatio: st.passiveFailureRatio}
			}
			votes = append(votes, toVotes(a.node.id, ballot.Targets, w.targets, a.results, rule, w.passiveOnly)...)
		case <-ctx.Done():
			for _, w := range pending {
				late = append(late, w.node.id)
				votes = append(votes, w.abstainAll(ballot.Targets, w.targets, sdk.ReasonOutOfTime, "the node did not answer by the round's deadline")...)
			}
			break wait
		}
	}
	if len(late) > 0 || len(gone) > 0 {
		sort.Strings(late)
		sort.Strings(gone)
		s.log.Warn("nodes gave no answer this round; they abstain", "round", ballot.Round, "late", late, "went_offline", gone)
	}
	s.log.Debug("round done", "round", ballot.Round, "online", len(online), "targets", len(ballot.Targets), "votes", len(votes))
	return votes, nil
}

// usesProbeSettings reports whether a target needs settings that only
// nodes announcing featureProbeSettings run.
func usesProbeSettings(t *sdk.Target) bool {
	return t.TLS != (sdk.TLSSettings{}) || len(t.Headers) > 0 || t.FollowRedirects || t.MaxBody != 0
}

func abstain(t *sdk.Target, voter string, reason sdk.Reason, detail string) sdk.Vote {
	return sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: voter, Value: sdk.Abstain, Reason: reason, Detail: detail}
}

// abstainAll is one abstention of voter for each of the targets.
func abstainAll(all []sdk.Target, targets []int, voter string, reason sdk.Reason, detail string) []sdk.Vote {
	out := make([]sdk.Vote, len(targets))
	for i, ti := range targets {
		out[i] = abstain(&all[ti], voter, reason, detail)
	}
	return out
}

func sortNodes(ns []NodeStatus) {
	sort.Slice(ns, func(i, j int) bool { return ns[i].ID < ns[j].ID })
}

// work is one node's share of a round.
type work struct {
	node    *conn
	targets []int // indexes into the ballot's targets
	// passiveOnly marks the targets (by index) the node only reports its
	// passive window for: it was not chosen to probe them.
	passiveOnly map[int]bool
}

// abstainAll is one abstention for each of targets: of the node, or of
// its passive voter for a passive-only target.
func (w *work) abstainAll(all []sdk.Target, targets []int, reason sdk.Reason, detail string) []sdk.Vote {
	out := abstainAll(all, targets, w.node.id, reason, detail)
	for i, ti := range targets {
		if w.passiveOnly[ti] {
			out[i].Voter = w.node.id + PassiveSuffix
		}
	}
	return out
}

// addPassive adds to plan, for every target, a passive-only job for each
// online node that keeps passive windows, is eligible for the target's
// site, and was not chosen to probe it: probes are sampled, but every
// proxying node's window is a voter (its traffic is real either way).
func addPassive(plan []work, targets []sdk.Target, online []*conn, siteLabels map[string]labels.Set) []work {
	at := map[*conn]int{}
	for i := range plan {
		at[plan[i].node] = i
	}
	for _, c := range online {
		if !c.passive {
			continue
		}
		i, ok := at[c]
		chosen := map[int]bool{}
		if ok {
			for _, ti := range plan[i].targets {
				chosen[ti] = true
			}
		}
		for ti := range targets {
			if chosen[ti] || !siteLabels[targets[ti].Site].Matches(c.labels) {
				continue
			}
			if !ok {
				plan = append(plan, work{node: c})
				i, ok = len(plan)-1, true
				at[c] = i
			}
			if plan[i].passiveOnly == nil {
				plan[i].passiveOnly = map[int]bool{}
			}
			plan[i].targets = append(plan[i].targets, ti)
			plan[i].passiveOnly[ti] = true
		}
	}
	return plan
}

// assign chooses, for every target, up to k of the eligible online nodes
// (sorted by id). The choice is a window of k consecutive nodes whose start
// moves by k every round, offset per origin: over ceil(n/k) rounds every
// eligible node gets work, and origins of one round spread over different
// nodes. unserved lists the targets no node is eligible for.
func assign(round uint64, targets []sdk.Target, online []*conn, k int, siteLabels map[string]labels.Set) (plan []work, unserved []int) {
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
			unserved = append(unserved, i)
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
	plan = make([]work, len(order))
	for i, c := range order {
		plan[i] = *byNode[c]
	}
	return plan, unserved
}

// job is the probe job of a target.
func job(t *sdk.Target) *pb.ProbeJob {
	j := &pb.ProbeJob{Address: t.Address, Host: t.Host, Path: t.Path, TimeoutNs: int64(t.Timeout), UserAgent: t.UserAgent,
		ExpectedBody: t.Expect.BodyContains, MaxLatencyNs: int64(t.Expect.MaxLatency),
		TlsServerName: t.TLS.ServerName, Ca: t.TLS.CA, InsecureSkipVerify: t.TLS.InsecureSkipVerify,
		Headers: t.Headers, FollowRedirects: t.FollowRedirects, MaxBody: t.MaxBody}
	for _, st := range t.Expect.Statuses {
		j.ExpectedStatuses = append(j.ExpectedStatuses, int32(st))
	}
	return j
}

// PassiveSuffix ends the voter id of a node's passive votes: NODE/passive.
const PassiveSuffix = "/passive"

// passiveRule turns passive windows into votes (passive_votes = true).
type passiveRule struct {
	minRequests  int
	failureRatio float64
}

// vote is voter's passive vote on t from the window w (nil: the node saw
// no request to the origin within its window). A window with fewer than
// minRequests judged requests (ignored ones not counted) abstains
// (no_voter, node/passive_sparse); one whose failures, slow answers
// included, are more than failureRatio of them is a Down, its reason the
// most common kind of failure; otherwise an Up.
func (p *passiveRule) vote(t *sdk.Target, voter string, w *pb.PassiveResult) sdk.Vote {
	judged := int(w.GetRequests()) - int(w.GetIgnored())
	if judged < p.minRequests {
		v := abstain(t, voter, sdk.ReasonNoVoter, fmt.Sprintf("%d requests in the passive window (%d ignored), fewer than passive_min_requests %d",
			w.GetRequests(), w.GetIgnored(), p.minRequests))
		v.PluginReason = "node/passive_sparse"
		return v
	}
	failed := int(w.GetFailures() + w.GetSlow())
	timeouts := int(w.GetTimeouts())
	http5xx := int(w.GetFailures()) - timeouts
	slow := int(w.GetSlow())
	v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: voter, Value: sdk.Up, Reason: sdk.ReasonOK}
	pct := 100 * float64(failed) / float64(judged)
	v.Detail = fmt.Sprintf("%d of %d requests failed (%.0f%%)", failed, judged, pct)
	if w.GetIgnored() > 0 || slow > 0 {
		v.Detail += fmt.Sprintf("; %d slow, %d ignored", slow, w.GetIgnored())
	}
	if float64(failed) <= p.failureRatio*float64(judged) {
		return v
	}
	v.Value = sdk.Down
	switch {
	case http5xx >= timeouts && http5xx >= slow:
		v.Reason = sdk.ReasonHTTP5xx
	case timeouts >= slow:
		v.Reason = sdk.ReasonTimeout
	default:
		v.Reason = sdk.ReasonTooSlow
	}
	return v
}

// toVotes turns a node's answer into votes: one per job sent to it. A
// result is the node's verdict; a job the node reported not run, or left
// out of its answer (nodes older than the not_run feature do), is an
// Abstain (out_of_time unless the node said otherwise), never a Down.
// With passive (non-nil: the gateway opted in and the node keeps passive
// windows), every result also gives a passive vote of voter NODE/passive
// (see passiveRule.vote), unless that id would be too long.
//
// passiveOnly marks the targets (by index into all) whose jobs asked for
// the passive window only: they get no probe vote, and with passive nil
// no vote at all.
func toVotes(node string, all []sdk.Target, targets []int, res *pb.BatchResult, passive *passiveRule, passiveOnly map[int]bool) []sdk.Vote {
	votes := make([]sdk.Vote, 0, len(targets))
	passiveVoter := node + PassiveSuffix
	if passive != nil && !sdk.ValidVoter(passiveVoter) {
		passive = nil
	}
	seen := make([]bool, len(targets))
	for _, r := range res.GetResults() {
		if int(r.GetJob()) >= len(targets) || seen[r.GetJob()] {
			continue // garbage or a duplicate: ignored
		}
		seen[r.GetJob()] = true
		t := &all[targets[r.GetJob()]]
		if passive != nil {
			votes = append(votes, passive.vote(t, passiveVoter, r.GetPassive()))
		}
		if passiveOnly[targets[r.GetJob()]] {
			continue
		}
		reason, ok := sdk.ParseReason(r.GetReason())
		if r.GetNotRun() || !r.GetUp() && abstainsOnly(reason) {
			if !abstainsOnly(reason) {
				reason = sdk.ReasonOutOfTime
			}
			detail := clip(r.GetDetail())
			if detail == "" {
				detail = "the node did not run the job"
			}
			votes = append(votes, abstain(t, node, reason, detail))
			continue
		}
		if !ok {
			reason = sdk.ReasonError
		}
		v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: node, Value: sdk.Down, Reason: reason,
			Detail: clip(r.GetDetail()), Latency: time.Duration(r.GetLatencyNs()), HTTP: httpOf(r)}
		if r.GetUp() {
			v.Value = sdk.Up
		}
		votes = append(votes, v)
	}
	for i, ti := range targets {
		if !seen[i] && passiveOnly[ti] {
			if passive != nil {
				votes = append(votes, abstain(&all[ti], passiveVoter, sdk.ReasonOutOfTime, "the node answered without its passive window"))
			}
			continue
		}
		if !seen[i] {
			votes = append(votes, abstain(&all[ti], node, sdk.ReasonOutOfTime, "the node answered without a result for this job"))
		}
	}
	return votes
}

// abstainsOnly reports whether r is a reason for an abstention, never for
// a verdict: a node's result with one is no Down.
func abstainsOnly(r sdk.Reason) bool {
	switch r {
	case sdk.ReasonOutOfTime, sdk.ReasonUnsupported, sdk.ReasonOverBudget, sdk.ReasonNoVoter:
		return true
	}
	return false
}

// httpOf is the vote's HTTP fields from a node's result, nil from a node
// that sends none (one older than the fields: no status and no phase).
func httpOf(r *pb.ProbeResult) *sdk.HTTPProbe {
	if r.GetStatusCode() == 0 && r.GetConnectNs() == 0 && r.GetResolveNs() == 0 {
		return nil
	}
	h := &sdk.HTTPProbe{StatusCode: int(r.GetStatusCode()),
		Resolve: time.Duration(r.GetResolveNs()), Connect: time.Duration(r.GetConnectNs()), TLS: time.Duration(r.GetTlsNs()),
		Processing: time.Duration(r.GetProcessingNs()), Transfer: time.Duration(r.GetTransferNs())}
	if u := r.GetCertNotAfterUnix(); u != 0 {
		h.CertNotAfter = time.Unix(u, 0)
	}
	return h
}
