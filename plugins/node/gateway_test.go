package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/probe"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("edge-%d", i+1)
	}
	return out
}

// TestFiveAgentsSpreadOverRounds: five real agents probe real origins; each
// origin gets exactly three votes per round from three distinct nodes, and
// over a few rounds every node gets work. The gateway is driven through the
// sdk's gRPC client, as vigil drives it.
func TestFiveAgentsSpreadOverRounds(t *testing.T) {
	gw := startGateway(t, nil)
	for _, id := range ids(5) {
		startAgent(t, gw.Addr().String(), id)
	}
	awaitOnline(t, gw, 5)
	src := sdktest.InProcess(t, gw)

	up, down := origin(t, 200), origin(t, 503)
	ballot := sdk.Ballot{Targets: []sdk.Target{
		{Site: "www", Origin: "a1", Address: up, Host: "www.example.com", Path: "/health", Timeout: 2 * time.Second},
		{Site: "www", Origin: "a2", Address: down, Host: "www.example.com", Path: "/health", Timeout: 2 * time.Second},
		{Site: "img", Origin: "b1", Address: up, Host: "img.example.com", Path: "/", Timeout: 2 * time.Second},
	}}
	worked := map[string]int{}
	const rounds = 4
	for r := range rounds {
		ballot.Round = uint64(r + 1)
		votes := vote(t, src, ballot, 10*time.Second)
		sdktest.CheckVotes(t, ballot, votes)
		per := map[string]map[string]bool{}
		for _, v := range votes {
			key := v.Site + "/" + v.Origin
			if per[key] == nil {
				per[key] = map[string]bool{}
			}
			if per[key][v.Voter] {
				t.Errorf("round %d: %s voted twice for %s", r, v.Voter, key)
			}
			per[key][v.Voter] = true
			worked[v.Voter]++
			want := sdk.Up
			if v.Origin == "a2" {
				want = sdk.Down
			}
			if v.Value != want {
				t.Errorf("round %d: %s voted %v for %s, want %v (%s)", r, v.Voter, v.Value, key, want, v.Detail)
			}
		}
		for _, tg := range ballot.Targets {
			if n := len(per[tg.Site+"/"+tg.Origin]); n != DefaultNodesPerRound {
				t.Errorf("round %d: %s/%s got %d voters, want %d", r, tg.Site, tg.Origin, n, DefaultNodesPerRound)
			}
		}
	}
	for _, id := range ids(5) {
		if worked[id] == 0 {
			t.Errorf("node %s got no work in %d rounds: %v", id, rounds, worked)
		}
	}
	t.Logf("jobs per node over %d rounds: %v", rounds, worked)
}

// TestSplitVotePassedOn: two eligible nodes disagree. The gateway returns
// both votes; with min_votes = 2 a 1-1 split has no strict majority, so
// vigil passes the origin on to the next source (the gateway must not
// drop or break the tie itself).
func TestSplitVotePassedOn(t *testing.T) {
	gw := startGateway(t, map[string]any{"nodes_per_round": 3.0, "site_labels": []string{"www: pair=yes"}})
	opinion := func(up bool) func(context.Context, probe.Request) (probe.Result, error) {
		return func(context.Context, probe.Request) (probe.Result, error) {
			if up {
				return probe.Result{Up: true, Reason: probe.OK, Status: 200}, nil
			}
			return probe.Result{Reason: probe.HTTP5xx, Status: 503, Detail: "HTTP 503"}, nil
		}
	}
	startAgent(t, gw.Addr().String(), "eu-1", withLabels(map[string]string{"pair": "yes"}), withProber(opinion(true)))
	startAgent(t, gw.Addr().String(), "eu-2", withLabels(map[string]string{"pair": "yes"}), withProber(opinion(false)))
	for _, id := range []string{"other-1", "other-2", "other-3"} {
		startAgent(t, gw.Addr().String(), id, withProber(opinion(true)))
	}
	awaitOnline(t, gw, 5)

	ballot := sdk.Ballot{Round: 1, Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: "http://192.0.2.1", Host: "www.example.com"}}}
	votes := vote(t, gw, ballot, 10*time.Second)
	if len(votes) != 2 {
		t.Fatalf("got %d votes, want 2 (only the labelled pair may vote): %+v", len(votes), votes)
	}
	up, down := 0, 0
	for _, v := range votes {
		if !strings.HasPrefix(v.Voter, "eu-") {
			t.Errorf("vote from %s, which lacks the site's labels", v.Voter)
		}
		if v.Value == sdk.Up {
			up++
		} else {
			down++
		}
	}
	if up != 1 || down != 1 {
		t.Errorf("up=%d down=%d, want a 1-1 split", up, down)
	}
	// The tally of decisions.md with min_votes = 2: no strict majority either way.
	if n := up + down; n >= 2 && (2*up > n || 2*down > n) {
		t.Errorf("a 1-1 split settled the origin")
	}
}

// TestAgentDiesMidRound: a chosen node dies while probing. It abstains
// (no_voter: it went offline before answering), the other nodes' votes
// arrive, and Vote returns as soon as the dead node's stream is gone, well
// before the deadline.
func TestAgentDiesMidRound(t *testing.T) {
	gw := startGateway(t, nil)
	fast := func(context.Context, probe.Request) (probe.Result, error) {
		return probe.Result{Up: true, Reason: probe.OK, Status: 200}, nil
	}
	started := make(chan struct{}, 1)
	stuck := func(ctx context.Context, _ probe.Request) (probe.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return probe.Result{}, ctx.Err()
	}
	startAgent(t, gw.Addr().String(), "a", withProber(fast))
	startAgent(t, gw.Addr().String(), "b", withProber(fast))
	victim := startAgent(t, gw.Addr().String(), "c", withProber(stuck))
	awaitOnline(t, gw, 3)

	go func() {
		<-started
		victim.kill()
	}()
	// A deadline far above the vote's need: a vote that waited for the
	// dead node's deadline would take half of it, on any machine.
	const deadline = 2 * time.Minute
	begin := time.Now()
	votes := vote(t, gw, sdk.Ballot{Round: 1, Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: "http://192.0.2.1"}}}, deadline)
	if took := time.Since(begin); took > deadline/2 {
		t.Errorf("Vote took %s: it should return when the dead node's stream ends, not at the deadline", took)
	}
	got := map[string]sdk.Vote{}
	for _, v := range votes {
		got[v.Voter] = v
	}
	if len(votes) != 3 || got["a"].Value != sdk.Up || got["b"].Value != sdk.Up {
		t.Errorf("votes %+v, want a and b up", votes)
	}
	// no_voter when its stream ended first; out_of_time when it got its
	// answer out as it stopped.
	if c := got["c"]; c.Value != sdk.Abstain || c.Reason != sdk.ReasonNoVoter && c.Reason != sdk.ReasonOutOfTime {
		t.Errorf("the dead node's vote %+v, want an abstention", c)
	}
}

// TestSlowNodeMissesDeadline: a node that takes the batch and never
// answers (a raw protocol client here) abstains out of time, with its id as
// voter; the others' votes come back before the call's deadline.
func TestSlowNodeMissesDeadline(t *testing.T) {
	gw := startGateway(t, nil)
	startAgent(t, gw.Addr().String(), "quick", withProber(func(context.Context, probe.Request) (probe.Result, error) {
		return probe.Result{Up: true, Reason: probe.OK, Status: 200}, nil
	}))
	conn, err := grpc.NewClient("passthrough:///"+gw.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+testToken))
	t.Cleanup(cancel)
	stream, err := pb.NewNodeGatewayClient(conn).Attach(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.NodeMessage{Msg: &pb.NodeMessage_Hello{Hello: &pb.Hello{NodeId: "silent", ProtocolVersion: ProtocolVersion}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("welcome: %v %v", m, err)
	}
	awaitOnline(t, gw, 2)
	got := make(chan *pb.Batch, 1)
	go func() {
		m, err := stream.Recv()
		if err == nil {
			got <- m.GetBatch()
		}
	}()

	// The silent node holds the vote to the gateway's answer margin
	// before the deadline; the quick node needs far less than that, even
	// on a loaded machine. That the answer comes back as votes (vote
	// fails the test on an error) is the contract; how close to the
	// deadline is not measured here.
	const deadline = 5 * time.Second
	votes := vote(t, gw, sdk.Ballot{Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: "http://192.0.2.1"}}}, deadline)
	byVoter := map[string]sdk.Vote{}
	for _, v := range votes {
		byVoter[v.Voter] = v
	}
	if len(votes) != 2 || byVoter["quick"].Value != sdk.Up {
		t.Errorf("votes %+v, want quick up", votes)
	}
	if s := byVoter["silent"]; s.Value != sdk.Abstain || s.Reason != sdk.ReasonOutOfTime {
		t.Errorf("the silent node's vote %+v, want an abstention out of time", s)
	}
	if b := <-got; b == nil || len(b.GetJobs()) != 1 || b.GetBudgetMs() <= 0 || b.GetBudgetMs() > deadline.Milliseconds() {
		t.Errorf("the silent node's batch: %+v", b)
	}
}

// TestAgentReconnects: the gateway restarts; the agent comes back on its
// own (backoff) and votes again.
func TestAgentReconnects(t *testing.T) {
	gw := startGateway(t, nil)
	addr := gw.Addr().String()
	a := startAgent(t, addr, "edge-1", withProber(func(context.Context, probe.Request) (probe.Result, error) {
		return probe.Result{Up: true, Reason: probe.OK}, nil
	}))
	a.await(t, nodeagent.EventAttached)
	awaitOnline(t, gw, 1)

	gw.Close()
	a.await(t, nodeagent.EventDetached)
	if err := gw.Configure(context.Background(), sdk.Config{Values: map[string]any{"listen": addr, "token_env": "VIGIL_NODE_TOKEN"}}); err != nil {
		t.Fatalf("restart the gateway: %v", err)
	}
	a.await(t, nodeagent.EventAttached)
	awaitOnline(t, gw, 1)
	votes := vote(t, gw, sdk.Ballot{Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: "http://192.0.2.1"}}}, 10*time.Second)
	if len(votes) != 1 || votes[0].Voter != "edge-1" {
		t.Errorf("votes after reconnecting: %+v", votes)
	}
}

// TestRefused: wrong token, duplicate id. The agent gets a clear error that
// never shows a token, and the gateway counts no such node.
func TestRefused(t *testing.T) {
	gw := startGateway(t, nil)
	startAgent(t, gw.Addr().String(), "taken")
	awaitOnline(t, gw, 1)
	tests := []struct {
		name, id, token, want string
	}{
		{name: "wrong token", id: "intruder", token: "not-the-token", want: "refused this node's token"},
		{name: "no token", id: "intruder", token: "", want: "refused this node's token"},
		{name: "id in use", id: "taken", token: testToken, want: "already attached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []agentOpt{withToken(tt.token)}
			if tt.token == "" {
				// agent.New refuses a node without credentials; send an empty bearer instead.
				opts = []agentOpt{withToken(" ")}
			}
			a := startAgent(t, gw.Addr().String(), tt.id, opts...)
			e := a.await(t, nodeagent.EventRefused)
			if e.Err == nil || !strings.Contains(e.Err.Error(), tt.want) {
				t.Fatalf("refusal %v, want %q", e.Err, tt.want)
			}
			for _, secret := range []string{testToken, "not-the-token"} {
				if strings.Contains(e.Err.Error(), secret) {
					t.Errorf("the error shows a token: %v", e.Err)
				}
			}
			a.kill()
			if n := len(gw.Nodes()); n != 1 {
				t.Errorf("%d nodes attached, want only the first", n)
			}
		})
	}
	votes := vote(t, gw, sdk.Ballot{Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: "http://192.0.2.1"}}}, 5*time.Second)
	for _, v := range votes {
		if v.Voter != "taken" {
			t.Errorf("vote from refused node %s", v.Voter)
		}
	}
}

// TestNoNodeAbstains: with nobody online the source answers at once with
// one abstention per target (no_voter, voter GatewayVoter) that passes
// vigil's vote rules; with nodes online, a site whose labels no node
// carries gets the same while the others are probed.
func TestNoNodeAbstains(t *testing.T) {
	gw := startGateway(t, map[string]any{"site_labels": []string{"img: region=mars"}})
	src := sdktest.InProcess(t, gw)
	ballot := sdk.Ballot{Round: 1, Targets: []sdk.Target{
		{Site: "www", Origin: "a1", Address: "http://192.0.2.1"},
		{Site: "www", Origin: "a2", Address: "http://192.0.2.2"},
		{Site: "img", Origin: "b1", Address: "http://192.0.2.3"},
	}}
	// A deadline far above the vote's need: a vote that waited for a
	// node would take half of it, on any machine.
	const deadline = 2 * time.Minute
	begin := time.Now()
	votes := vote(t, src, ballot, deadline)
	if took := time.Since(begin); took > deadline/2 {
		t.Errorf("Vote without nodes took %s: it waited instead of answering at once", took)
	}
	if problems := sdk.CheckVotes(ballot, votes); len(problems) > 0 {
		t.Errorf("vigil would drop votes: %+v", problems)
	}
	sdktest.CheckVotes(t, ballot, votes)
	if len(votes) != len(ballot.Targets) {
		t.Fatalf("%d votes for %d targets: %+v", len(votes), len(ballot.Targets), votes)
	}
	for _, v := range votes {
		if v.Value != sdk.Abstain || v.Reason != sdk.ReasonNoVoter || v.Voter != GatewayVoter || !strings.Contains(v.Detail, "no node is online") {
			t.Errorf("vote %+v, want an abstention no_voter by %s", v, GatewayVoter)
		}
	}

	startAgent(t, gw.Addr().String(), "edge-1", withProber(fastProber))
	awaitOnline(t, gw, 1)
	ballot.Round = 2
	votes = vote(t, src, ballot, 5*time.Second)
	sdktest.CheckVotes(t, ballot, votes)
	got := map[string]sdk.Vote{}
	for _, v := range votes {
		got[v.Origin] = v
	}
	if len(votes) != 3 || got["a1"].Value != sdk.Up || got["a2"].Value != sdk.Up || got["a1"].Voter != "edge-1" {
		t.Errorf("votes %+v, want www's origins up by edge-1", votes)
	}
	if b := got["b1"]; b.Value != sdk.Abstain || b.Reason != sdk.ReasonNoVoter || b.Voter != GatewayVoter || !strings.Contains(b.Detail, "region=mars") {
		t.Errorf("vote for img/b1 %+v, want an abstention no_voter naming the labels", b)
	}
}

func TestConfigureErrors(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		path   string
		want   string
	}{
		{"no auth", map[string]any{"listen": "127.0.0.1:0"}, "", "Set token_env"},
		{"token env unset", map[string]any{"listen": "127.0.0.1:0", "token_env": "NOPE"}, "token_env", "list it in the source's env"},
		{"bad listen", map[string]any{"listen": "8471", "token_env": "VIGIL_NODE_TOKEN"}, "listen", "write host:port"},
		{"nodes_per_round 0", map[string]any{"listen": "127.0.0.1:0", "token_env": "VIGIL_NODE_TOKEN", "nodes_per_round": 0.0}, "nodes_per_round", "whole number from 1"},
		{"nodes_per_round 2.5", map[string]any{"listen": "127.0.0.1:0", "token_env": "VIGIL_NODE_TOKEN", "nodes_per_round": 2.5}, "nodes_per_round", "whole number"},
		{"bad site_labels", map[string]any{"listen": "127.0.0.1:0", "token_env": "VIGIL_NODE_TOKEN", "site_labels": []string{"www: a=b", "img region=eu"}}, "site_labels[1]", "SITE: key=value"},
		{"site twice", map[string]any{"listen": "127.0.0.1:0", "token_env": "VIGIL_NODE_TOKEN", "site_labels": []string{"www: a=b", "www: c=d"}}, "site_labels[1]", "merge"},
		{"cert without key", map[string]any{"listen": "127.0.0.1:0", "token_env": "VIGIL_NODE_TOKEN", "tls_cert_file": "x.pem"}, "tls_cert_file", "both"},
		{"ca without cert", map[string]any{"listen": "127.0.0.1:0", "client_ca_file": "ca.pem"}, "client_ca_file", "tls_cert_file"},
		{"short timeout", map[string]any{"listen": "127.0.0.1:0", "token_env": "VIGIL_NODE_TOKEN", "online_timeout": time.Millisecond}, "online_timeout", "at least"},
		{"forget_after not above online_timeout", map[string]any{"listen": "127.0.0.1:0", "token_env": "VIGIL_NODE_TOKEN", "online_timeout": time.Minute, "forget_after": time.Minute}, "forget_after", "set forget_after longer than online_timeout, e.g. forget_after = \"24h\""},
		{"online_timeout above the default forget_after", map[string]any{"listen": "127.0.0.1:0", "token_env": "VIGIL_NODE_TOKEN", "online_timeout": 30 * time.Hour}, "forget_after", "e.g. forget_after = \"60h\""},
		{"hello_timeout too short", map[string]any{"listen": "127.0.0.1:0", "token_env": "VIGIL_NODE_TOKEN", "hello_timeout": time.Millisecond}, "hello_timeout", "use 100ms to 5m"},
		{"hello_timeout too long", map[string]any{"listen": "127.0.0.1:0", "token_env": "VIGIL_NODE_TOKEN", "hello_timeout": time.Hour}, "hello_timeout", "use 100ms to 5m"},
		{"negative forget_after", map[string]any{"listen": "127.0.0.1:0", "token_env": "VIGIL_NODE_TOKEN", "forget_after": -time.Hour}, "forget_after", "longer than online_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := New(nil)
			src.getenv = func(n string) string {
				if n == "VIGIL_NODE_TOKEN" {
					return testToken
				}
				return ""
			}
			t.Cleanup(src.Close)
			err := sdktest.ConfigureErr(t, src, sdk.Config{Values: tt.values})
			var diags sdk.Diagnostics
			if !errors.As(err, &diags) {
				t.Fatalf("error %v, want diagnostics", err)
			}
			for _, d := range diags {
				if d.AttributePath == tt.path && strings.Contains(d.Error(), tt.want) {
					if strings.Contains(d.Error(), testToken) {
						t.Errorf("diagnostic shows the token: %v", d)
					}
					return
				}
			}
			t.Errorf("diagnostics %v: want one at %q containing %q", diags, tt.path, tt.want)
		})
	}
}
