package node

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
)

// testClock is a clock that moves only when told to.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Now()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// withClock makes the gateway read the time from clk.
func withClock(clk *testClock) func(*Source) { return func(s *Source) { s.reg.now = clk.Now } }

// withMaxOffline lowers the bound on offline nodes kept.
func withMaxOffline(n int) func(*Source) { return func(s *Source) { s.reg.maxOffline = n } }

// withLog sends the gateway's log, from Info up, to buf as well as to the
// test's log.
func withLog(t *testing.T, buf *logBuffer) func(*Source) {
	return func(s *Source) {
		l := hclog.New(&hclog.LoggerOptions{Name: "gateway", Level: hclog.Info, Output: multiOutput{buf, newTestOutput(t)}})
		s.log, s.reg.log = l, l
	}
}

// logBuffer keeps log lines to count.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, strings.Split(strings.TrimRight(string(p), "\n"), "\n")...)
	return len(p), nil
}

// count returns how many lines contain all of subs.
func (b *logBuffer) count(subs ...string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
next:
	for _, l := range b.lines {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		n++
	}
	return n
}

type multiOutput struct {
	buf *logBuffer
	t   testOutput
}

func (m multiOutput) Write(p []byte) (int, error) {
	_, _ = m.buf.Write(bytes.Clone(p))
	return m.t.Write(p)
}

// rawNode is a node speaking the protocol by hand: it says hello and then
// only what the test makes it say (no heartbeats of its own).
type rawNode struct {
	stream  grpc.BidiStreamingClient[pb.NodeMessage, pb.GatewayMessage]
	batches chan *pb.Batch // every batch the gateway sent it
	ended   chan struct{}  // closed when the gateway ended the stream
	welcome *pb.Welcome
}

// attachRaw attaches a raw node announcing features (none: a node of the
// protocol's first release).
func attachRaw(t *testing.T, addr, id string, lbls map[string]string, features ...string) *rawNode {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+testToken))
	stream, err := pb.NewNodeGatewayClient(cc).Attach(ctx)
	if err != nil {
		cancel()
		_ = cc.Close()
		t.Fatal(err)
	}
	n := &rawNode{stream: stream, batches: make(chan *pb.Batch, 16), ended: make(chan struct{})}
	t.Cleanup(func() {
		cancel()
		<-n.ended
		_ = cc.Close()
	})
	hello := &pb.Hello{NodeId: id, Labels: lbls, AgentVersion: "raw-test", ProtocolVersion: ProtocolVersion, Features: features}
	if err := stream.Send(&pb.NodeMessage{Msg: &pb.NodeMessage_Hello{Hello: hello}}); err != nil {
		t.Fatal(err)
	}
	m, err := stream.Recv()
	if err != nil || m.GetWelcome() == nil {
		t.Fatalf("raw node %s: welcome: %v %v", id, m, err)
	}
	n.welcome = m.GetWelcome()
	go func() {
		defer close(n.ended)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			if b := m.GetBatch(); b != nil {
				select {
				case n.batches <- b:
				default: // more than a test looks at
				}
			}
		}
	}()
	return n
}

// awaitNode waits until ok(the node's status, whether it is listed) holds
// for node id, and returns its status.
func awaitNode(t *testing.T, src *Source, id string, ok func(NodeStatus, bool) bool) NodeStatus {
	t.Helper()
	timeout := time.After(time.Minute) // a hang guard
	for {
		changed := src.Changed()
		var n NodeStatus
		found := false
		for _, s := range src.Nodes() {
			if s.ID == id {
				n, found = s, true
			}
		}
		if ok(n, found) {
			return n
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("node %s not as awaited within a minute: %+v", id, src.Nodes())
		}
	}
}

func isOffline(n NodeStatus, listed bool) bool { return listed && n.State == "offline" }

// statusPage is the plugin's own GET /v1/nodes.
type statusPage struct {
	Online  int          `json:"online"`
	Nodes   []NodeStatus `json:"nodes"`
	Offline []NodeStatus `json:"offline"`
}

func getStatusPage(t *testing.T, src *Source) statusPage {
	t.Helper()
	resp, err := http.Get("http://" + src.StatusAddr().String() + "/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p statusPage
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatalf("GET /v1/nodes: %v", err)
	}
	return p
}

func nodeIDs(ns []NodeStatus) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	return out
}
