package node

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/probe"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

func fastProber(context.Context, probe.Request) (probe.Result, error) {
	return probe.Result{Up: true, Reason: probe.OK, Status: 200}, nil
}

var oneTarget = sdk.Ballot{Round: 1, Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: "http://192.0.2.1"}}}

// TestNodeGoesOffline: of two nodes, one stops (its stream ends) or goes
// silent (it misses its heartbeats). It stays listed as offline, with its
// last-seen time, labels, address, agent version and why, in Status (read
// over the plugin protocol, as vigil reads it) and on status_listen; the
// summary says 1 of 2; it gets no vote.
func TestNodeGoesOffline(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		// start attaches node "victim" and returns what makes it go offline.
		start   func(t *testing.T, addr string) (goOffline func())
		version string
		reason  string
		detail  string
	}{
		{
			name: "its stream ends", timeout: DefaultOnlineTimeout, version: nodeagent.Version,
			reason: offlineStreamEnded, detail: "", // "node closed the connection" or "connection lost", whichever the gateway sees first
			start: func(t *testing.T, addr string) func() {
				a := startAgent(t, addr, "victim", withLabels(map[string]string{"region": "eu"}), withProber(fastProber))
				return a.kill
			},
		},
		{
			name: "it misses its heartbeats", timeout: 600 * time.Millisecond, version: "raw-test",
			reason: offlineHeartbeat, detail: "no heartbeat for",
			start: func(t *testing.T, addr string) func() {
				attachRaw(t, addr, "victim", map[string]string{"region": "eu"})
				return func() {} // it never says a word after hello
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := startGateway(t, map[string]any{"status_listen": "127.0.0.1:0", "online_timeout": tt.timeout})
			startAgent(t, gw.Addr().String(), "keep", withProber(fastProber))
			begin := time.Now()
			goOffline := tt.start(t, gw.Addr().String())
			awaitOnline(t, gw, 2)
			goOffline()
			n := awaitNode(t, gw, "victim", func(n NodeStatus, listed bool) bool {
				return isOffline(n, listed) && n.OfflineReason == tt.reason && strings.Contains(n.OfflineDetail, tt.detail)
			})
			if n.Online || n.LastSeen.Before(begin) || n.LastSeen.After(time.Now()) || n.OfflineSince.Before(n.LastSeen) ||
				n.Labels["region"] != "eu" || n.AgentVersion != tt.version || !strings.HasPrefix(n.Remote, "127.0.0.1:") {
				t.Errorf("offline node %+v", n)
			}

			st, err := sdktest.InProcess(t, gw).(sdk.StatusReporter).Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Summary != "1 of 2 nodes online" || len(st.Items) != 2 {
				t.Fatalf("status %+v", st)
			}
			keep, victim := st.Items[0], st.Items[1]
			if keep.Name != "keep" || keep.State != "online" || strings.Contains(keep.Detail, "offline") {
				t.Errorf("online item %+v", keep)
			}
			if victim.Name != "victim" || victim.State != "offline" || !victim.LastSeen.Equal(n.LastSeen) || victim.Labels["region"] != "eu" {
				t.Errorf("offline item %+v, want last seen %s", victim, n.LastSeen)
			}
			for _, want := range []string{"offline since " + stamp(n.OfflineSince), tt.reason, tt.detail, "last seen " + stamp(n.LastSeen), "agent " + tt.version, "from 127.0.0.1:"} {
				if !strings.Contains(victim.Detail, want) {
					t.Errorf("offline item's detail %q lacks %q", victim.Detail, want)
				}
			}

			page := getStatusPage(t, gw)
			if page.Online != 1 || !slices.Equal(nodeIDs(page.Nodes), []string{"keep"}) || !slices.Equal(nodeIDs(page.Offline), []string{"victim"}) {
				t.Fatalf("GET /v1/nodes on status_listen: %+v", page)
			}
			if o := page.Offline[0]; o.State != "offline" || o.Online || !o.LastSeen.Equal(n.LastSeen) || !o.OfflineSince.Equal(n.OfflineSince) ||
				o.OfflineReason != tt.reason || o.Labels["region"] != "eu" || o.AgentVersion != tt.version || o.Remote != n.Remote {
				t.Errorf("offline node on status_listen %+v, want %+v", o, n)
			}
			if on := page.Nodes[0]; on.State != "online" || !on.OfflineSince.IsZero() || on.OfflineReason != "" {
				t.Errorf("online node on status_listen %+v", on)
			}

			votes := vote(t, gw, oneTarget, 10*time.Second)
			if len(votes) != 1 || votes[0].Voter != "keep" {
				t.Errorf("votes %+v, want one from keep", votes)
			}
		})
	}
}

// TestNodeComesBack: a node that went offline attaches again under the
// same id: the offline entry does not block it, and it is listed once, as
// online.
func TestNodeComesBack(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		clock   bool
		// leave attaches node "edge-1" and makes it go offline.
		leave func(t *testing.T, gw *Source, clk *testClock)
	}{
		{
			name: "after its stream ended", timeout: DefaultOnlineTimeout,
			leave: func(t *testing.T, gw *Source, _ *testClock) {
				a := startAgent(t, gw.Addr().String(), "edge-1")
				awaitOnline(t, gw, 1)
				a.kill()
				awaitNode(t, gw, "edge-1", isOffline)
			},
		},
		{
			name: "after the gateway ended its silent stream", timeout: 600 * time.Millisecond,
			leave: func(t *testing.T, gw *Source, _ *testClock) {
				attachRaw(t, gw.Addr().String(), "edge-1", nil)
				awaitNode(t, gw, "edge-1", func(n NodeStatus, listed bool) bool {
					return isOffline(n, listed) && strings.Contains(n.OfflineDetail, "no heartbeat for")
				})
			},
		},
		{
			// The gateway checks heartbeats every 20 minutes here, so the
			// silent stream is still open when the node comes back.
			name: "while its silent stream is still open (replaced)", timeout: time.Hour, clock: true,
			leave: func(t *testing.T, gw *Source, clk *testClock) {
				attachRaw(t, gw.Addr().String(), "edge-1", nil)
				awaitOnline(t, gw, 1)
				clk.Advance(2 * time.Hour)
				n := awaitNode(t, gw, "edge-1", isOffline)
				if n.OfflineReason != offlineHeartbeat || !strings.Contains(n.OfflineDetail, "stream still open") {
					t.Errorf("silent node %+v", n)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newTestClock()
			var opts []func(*Source)
			if tt.clock {
				opts = append(opts, withClock(clk))
			}
			gw := startGateway(t, map[string]any{"online_timeout": tt.timeout}, opts...)
			tt.leave(t, gw, clk)

			a := startAgent(t, gw.Addr().String(), "edge-1", withProber(fastProber))
			if e := a.await(t, nodeagent.EventAttached); e.Err != nil {
				t.Fatal(e.Err)
			}
			awaitOnline(t, gw, 1)
			nodes := gw.Nodes()
			if len(nodes) != 1 || nodes[0].ID != "edge-1" || !nodes[0].Online || nodes[0].State != "online" ||
				nodes[0].AgentVersion != nodeagent.Version || nodes[0].OfflineReason != "" {
				t.Fatalf("nodes after coming back: %+v", nodes)
			}
			st, _ := gw.Status(context.Background())
			if st.Summary != "1 of 1 nodes online" || len(st.Items) != 1 || st.Items[0].State != "online" {
				t.Errorf("status after coming back: %+v", st)
			}
			votes := vote(t, gw, oneTarget, 10*time.Second)
			if len(votes) != 1 || votes[0].Voter != "edge-1" {
				t.Errorf("votes after coming back: %+v", votes)
			}
		})
	}
}

// TestForgetAfter: an offline node is listed until it has been offline for
// forget_after, then forgotten, which is logged once.
func TestForgetAfter(t *testing.T) {
	clk := newTestClock()
	logs := &logBuffer{}
	gw := startGateway(t, map[string]any{"online_timeout": time.Hour, "forget_after": 2 * time.Hour}, withClock(clk), withLog(t, logs))
	a, b := startAgent(t, gw.Addr().String(), "a"), startAgent(t, gw.Addr().String(), "b")
	awaitOnline(t, gw, 2)
	a.kill()
	awaitNode(t, gw, "a", isOffline)
	clk.Advance(30 * time.Minute)
	b.kill()
	awaitNode(t, gw, "b", isOffline)

	const forgotten = "node forgotten after 2h offline"
	steps := []struct {
		name    string
		advance time.Duration
		listed  []string
		summary string
		logsA   int  // "node forgotten" lines for a so far
		logsB   int  // and for b
		forgets bool // whether this step forgets a node (and fires Changed)
	}{
		{"a just short of forget_after", 90*time.Minute - time.Nanosecond, []string{"a", "b"}, "0 of 2 nodes online", 0, 0, false},
		{"a at forget_after", time.Nanosecond, []string{"b"}, "0 of 1 nodes online", 1, 0, true},
		{"b at forget_after", 30 * time.Minute, []string{}, "0 of 0 nodes online", 1, 1, true},
		{"long after", 48 * time.Hour, []string{}, "0 of 0 nodes online", 1, 1, false},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			changed := gw.Changed()
			clk.Advance(s.advance)
			if got := nodeIDs(gw.Nodes()); !slices.Equal(got, s.listed) {
				t.Errorf("listed %v, want %v", got, s.listed)
			}
			st, _ := gw.Status(context.Background())
			if st.Summary != s.summary {
				t.Errorf("summary %q, want %q", st.Summary, s.summary)
			}
			for _, it := range st.Items {
				if it.State != "offline" || it.LastSeen.IsZero() {
					t.Errorf("item %+v", it)
				}
			}
			if n := logs.count(forgotten, "node=a"); n != s.logsA {
				t.Errorf("%q logged %d times for a, want %d", forgotten, n, s.logsA)
			}
			if n := logs.count(forgotten, "node=b"); n != s.logsB {
				t.Errorf("%q logged %d times for b, want %d", forgotten, n, s.logsB)
			}
			fired := false
			select {
			case <-changed:
				fired = true
			default:
			}
			if fired != s.forgets {
				t.Errorf("Changed fired: %v, want %v", fired, s.forgets)
			}
		})
	}

	startAgent(t, gw.Addr().String(), "a")
	awaitOnline(t, gw, 1)
	if got := nodeIDs(gw.Nodes()); !slices.Equal(got, []string{"a"}) {
		t.Errorf("a forgotten node coming back: listed %v", got)
	}
}

// TestOfflineBound: at most maxOffline offline nodes are kept, the one
// that went offline first forgotten first; a node that flaps is one entry.
func TestOfflineBound(t *testing.T) {
	tests := []struct {
		name      string
		max       int
		nodes     []string // attached, then stopped in this order
		flap      int      // then the last one comes back and leaves this often
		kept      []string
		forgotten []string
	}{
		{name: "under the bound", max: 3, nodes: []string{"n1", "n2", "n3"}, kept: []string{"n1", "n2", "n3"}},
		{name: "over the bound", max: 2, nodes: []string{"n1", "n2", "n3", "n4"}, kept: []string{"n3", "n4"}, forgotten: []string{"n1", "n2"}},
		{name: "a flapping node", max: 2, nodes: []string{"n1", "n2"}, flap: 4, kept: []string{"n1", "n2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &logBuffer{}
			gw := startGateway(t, nil, withMaxOffline(tt.max), withLog(t, logs))
			var agents []*testAgent
			for _, id := range tt.nodes {
				agents = append(agents, startAgent(t, gw.Addr().String(), id))
			}
			awaitOnline(t, gw, len(tt.nodes))
			for i, a := range agents {
				a.kill()
				awaitNode(t, gw, tt.nodes[i], isOffline)
			}
			last := tt.nodes[len(tt.nodes)-1]
			for range tt.flap {
				a := startAgent(t, gw.Addr().String(), last)
				awaitNode(t, gw, last, func(n NodeStatus, _ bool) bool { return n.Online })
				a.kill()
				awaitNode(t, gw, last, isOffline)
			}
			nodes := gw.Nodes()
			if got := nodeIDs(nodes); !slices.Equal(got, tt.kept) {
				t.Errorf("kept %v, want %v", got, tt.kept)
			}
			gw.reg.mu.Lock()
			entries, ordered := len(gw.reg.offline), gw.reg.order.Len()
			gw.reg.mu.Unlock()
			if entries != ordered || entries > tt.max {
				t.Errorf("%d offline entries, %d in order, bound %d", entries, ordered, tt.max)
			}
			for _, id := range tt.forgotten {
				if n := logs.count("node forgotten: too many nodes offline", "node="+id); n != 1 {
					t.Errorf("forgetting %s logged %d times, want once", id, n)
				}
			}
			if n := logs.count("too many nodes offline"); n != len(tt.forgotten) {
				t.Errorf("%d nodes forgotten for the bound, want %d", n, len(tt.forgotten))
			}
		})
	}
}

// TestOfflineNodesGetNoBatch: the only online node gets the round's batch;
// an offline one, detached or with its silent stream still open, gets
// nothing, and the round does not wait for it.
func TestOfflineNodesGetNoBatch(t *testing.T) {
	tests := []struct {
		name string
		// leave attaches node "off", makes it go offline and returns its
		// raw connection, if it still has one.
		leave func(t *testing.T, gw *Source, clk *testClock) *rawNode
	}{
		{
			name: "detached",
			leave: func(t *testing.T, gw *Source, _ *testClock) *rawNode {
				a := startAgent(t, gw.Addr().String(), "off", withProber(fastProber))
				awaitOnline(t, gw, 1)
				a.kill()
				awaitNode(t, gw, "off", isOffline)
				return nil
			},
		},
		{
			name: "silent, stream still open",
			leave: func(t *testing.T, gw *Source, clk *testClock) *rawNode {
				raw := attachRaw(t, gw.Addr().String(), "off", nil)
				awaitOnline(t, gw, 1)
				clk.Advance(2 * time.Hour)
				awaitNode(t, gw, "off", isOffline)
				return raw
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newTestClock()
			gw := startGateway(t, map[string]any{"online_timeout": time.Hour}, withClock(clk))
			raw := tt.leave(t, gw, clk)
			startAgent(t, gw.Addr().String(), "alive", withProber(fastProber))
			awaitOnline(t, gw, 1)
			if online := gw.reg.online(); len(online) != 1 || online[0].id != "alive" {
				t.Fatalf("online %v, want alive only", online)
			}

			// A deadline far above the vote's need: a vote that waited
			// for the offline node would take half of it, on any machine.
			const deadline = 2 * time.Minute
			begin := time.Now()
			votes := vote(t, gw, oneTarget, deadline)
			if took := time.Since(begin); took > deadline/2 {
				t.Errorf("Vote took %s: it waited for the offline node", took)
			}
			if len(votes) != 1 || votes[0].Voter != "alive" {
				t.Errorf("votes %+v, want one from alive", votes)
			}
			if raw != nil {
				select {
				case b := <-raw.batches:
					t.Errorf("the offline node got batch %+v", b)
				case <-raw.ended:
					t.Error("the gateway ended the silent node's stream: the test checks no batch reaches an open one")
				default:
				}
			}
		})
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour: "24h", 90 * time.Minute: "1h30m", 10 * time.Minute: "10m", 1500 * time.Millisecond: "1.5s", 61 * time.Second: "1m1s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %q, want %q", d, got, want)
		}
	}
}
