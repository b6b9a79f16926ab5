package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/sdk"
)

// refusedPage is the refusal part of GET /v1/nodes on status_listen.
type refusedPage struct {
	Refused           map[string]uint64 `json:"refused"`
	HeartbeatsDropped uint64            `json:"heartbeats_dropped"`
}

func getRefusedPage(t *testing.T, src *Source) refusedPage {
	t.Helper()
	resp, err := http.Get("http://" + src.StatusAddr().String() + "/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p refusedPage
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatalf("GET /v1/nodes: %v", err)
	}
	return p
}

// hangGuard only catches hangs: nothing in these tests is timed.
const hangGuard = 60 * time.Second

// dial opens a client connection to addr on loopback, closed at cleanup.
func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// openStream opens an Attach stream presenting token (none when empty);
// it is cancelled at cleanup.
func openStream(t testing.TB, cc *grpc.ClientConn, token string) grpc.BidiStreamingClient[pb.NodeMessage, pb.GatewayMessage] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	t.Cleanup(cancel)
	stream, err := pb.NewNodeGatewayClient(cc).Attach(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// tryAttach opens a stream presenting token, says hello as id, and
// returns how the stream ended (or how opening it failed).
func tryAttach(t testing.TB, cc *grpc.ClientConn, token, id string) codes.Code {
	t.Helper()
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token))
	defer cancel()
	s, err := pb.NewNodeGatewayClient(cc).Attach(ctx)
	if err != nil {
		return status.Code(err)
	}
	_ = s.Send(helloMsg(id))
	return endOf(t, s)
}

func helloMsg(id string) *pb.NodeMessage {
	return &pb.NodeMessage{Msg: &pb.NodeMessage_Hello{Hello: &pb.Hello{NodeId: id, AgentVersion: "abuse-test", ProtocolVersion: ProtocolVersion}}}
}

var heartbeatMsg = &pb.NodeMessage{Msg: &pb.NodeMessage_Heartbeat{Heartbeat: &pb.Heartbeat{}}}

// endOf waits (within hangGuard) for the stream's end and returns its
// status code; a welcome or batch on the way is skipped.
func endOf(t testing.TB, stream grpc.BidiStreamingClient[pb.NodeMessage, pb.GatewayMessage]) codes.Code {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		return status.Code(err)
	case <-time.After(hangGuard):
		t.Fatalf("the gateway did not end the stream within %s", hangGuard)
		return codes.OK
	}
}

// checkGoodNodeVotes: the well-behaved node beside the abuse still gets
// its batch and votes up.
func checkGoodNodeVotes(t *testing.T, gw *Source) {
	t.Helper()
	votes := vote(t, gw, sdk.Ballot{Round: 1, Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: "http://192.0.2.1"}}}, 20*time.Second)
	for _, v := range votes {
		if v.Voter == "good" && v.Value == sdk.Up {
			return
		}
	}
	t.Errorf("the well-behaved node did not vote up beside the abuse: %+v", votes)
}

// TestHelloDeadline: 300 streams that pass the token check and never say
// hello are all closed at hello_timeout, counted, and logged once (the
// address's failed attempts are not limited here: see
// TestHelloTimeoutsCutOff). A node attached before from the same address
// keeps voting.
func TestHelloDeadline(t *testing.T) {
	clk := newTestClock() // frozen: no log interval passes
	var logs logBuffer
	gw := startGateway(t, map[string]any{"hello_timeout": 300 * time.Millisecond}, withClock(clk), withLog(t, &logs),
		func(s *Source) { s.guard.burst = 1000 })
	startAgent(t, gw.Addr().String(), "good", withProber(fastProber))
	awaitOnline(t, gw, 1)

	const streams, conns = 300, 10
	ccs := make([]*grpc.ClientConn, conns)
	for i := range ccs {
		ccs[i] = dial(t, gw.Addr().String())
	}
	codesSeen := make([]codes.Code, streams)
	var wg sync.WaitGroup
	for i := range streams {
		stream := openStream(t, ccs[i%conns], testToken)
		wg.Go(func() { codesSeen[i] = endOf(t, stream) })
	}
	wg.Wait()
	byCode := map[codes.Code]int{}
	for _, c := range codesSeen {
		byCode[c]++
	}
	if byCode[codes.DeadlineExceeded] != streams {
		t.Errorf("stream ends %v: want all %d ended by the hello deadline (DeadlineExceeded)", byCode, streams)
	}
	if refused := gw.Refusals(); refused[refusedHelloTimeout] != streams {
		t.Errorf("refusals %v: want %d hello_timeout", refused, streams)
	}
	if n := logs.count("node refused", "peer=127.0.0.1", "reason=hello_timeout", "no hello within hello_timeout 300ms"); n != 1 {
		t.Errorf("%d log lines about the address, want 1", n)
	}
	if n := logs.count("node refused"); n != 1 {
		t.Errorf("%d refusal lines in all, want 1", n)
	}
	checkGoodNodeVotes(t, gw)
}

// TestHelloTimeoutsCutOff: hello timeouts are failed attempts of the
// address: after AuthFailureBurst+1 of them it is cut off, and the
// connection they came over is closed.
func TestHelloTimeoutsCutOff(t *testing.T) {
	gw := startGateway(t, map[string]any{"hello_timeout": 100 * time.Millisecond}, withClock(newTestClock()))
	cc := dial(t, gw.Addr().String())
	got := map[codes.Code]int{}
	for range AuthFailureBurst + 1 {
		got[endOf(t, openStream(t, cc, testToken))]++
	}
	// The last one closes the connection: its status may be lost.
	if got[codes.DeadlineExceeded] < AuthFailureBurst {
		t.Errorf("stream ends %v: want the first %d DeadlineExceeded", got, AuthFailureBurst)
	}
	if !gw.guard.isCutOff("127.0.0.1") {
		t.Errorf("the address is not cut off after %d hello timeouts", AuthFailureBurst+1)
	}
	gw.guard.mu.Lock()
	for _, c := range gw.guard.conns {
		if c.failed {
			t.Errorf("connection %s failed and is still open after its address was cut off", c.remote)
		}
	}
	gw.guard.mu.Unlock()
	if code := tryAttach(t, dial(t, gw.Addr().String()), testToken, "late"); code != codes.Unavailable && code != codes.ResourceExhausted {
		t.Errorf("a new connection from the cut-off address: %v, want Unavailable or ResourceExhausted", code)
	}
}

// TestHelloInTime: a stream whose hello comes late but within
// hello_timeout is welcomed, and a gateway with the default deadline
// welcomes the real agent.
func TestHelloInTime(t *testing.T) {
	gw := startGateway(t, map[string]any{"hello_timeout": 5 * time.Second})
	stream := openStream(t, dial(t, gw.Addr().String()), testToken)
	if err := stream.Send(helloMsg("slow-hello")); err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("welcome: %v %v", m, err)
	}
	if r := gw.Refusals(); len(r) != 0 {
		t.Errorf("refusals %v, want none", r)
	}
}

// TestHeartbeatFlood: a node sending heartbeats as fast as it can gets
// HeartbeatBurst of them processed (the clock is frozen: the bucket never
// refills), the next MaxDroppedHeartbeats dropped unread, and is then
// disconnected (ResourceExhausted), listed offline with the reason, and
// logged once; the well-behaved node beside it keeps voting.
func TestHeartbeatFlood(t *testing.T) {
	clk := newTestClock()
	var logs logBuffer
	gw := startGateway(t, map[string]any{"status_listen": "127.0.0.1:0"}, withClock(clk), withLog(t, &logs))
	startAgent(t, gw.Addr().String(), "good", withProber(fastProber))
	awaitOnline(t, gw, 1)

	stream := openStream(t, dial(t, gw.Addr().String()), testToken)
	if err := stream.Send(helloMsg("flood")); err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("welcome: %v %v", m, err)
	}
	awaitOnline(t, gw, 2)
	gw.reg.mu.Lock()
	fc := gw.reg.nodes["flood"]
	gw.reg.mu.Unlock()
	const flood = 20000 // bounded: stops at the first failed send
	sent := 0
	for ; sent < flood; sent++ {
		if err := stream.Send(heartbeatMsg); err != nil {
			break
		}
	}
	if code := endOf(t, stream); code != codes.ResourceExhausted {
		t.Errorf("the flooding stream ended with %v, want ResourceExhausted", code)
	}
	read, dropped := fc.unsolicited.Load(), fc.dropped.Load()
	processed := read - dropped
	t.Logf("sent %d heartbeats (sends stop failing only once the gateway has closed the stream); the gateway read %d, processed %d, dropped %d", sent, read, processed, dropped)
	if processed != HeartbeatBurst || dropped != MaxDroppedHeartbeats+1 {
		t.Errorf("processed %d, dropped %d: want %d processed (the burst; the frozen clock adds none) and %d dropped", processed, dropped, HeartbeatBurst, MaxDroppedHeartbeats+1)
	}
	n := awaitNode(t, gw, "flood", isOffline)
	if !strings.Contains(n.OfflineDetail, "heartbeats far over the limit") {
		t.Errorf("the flooder's offline detail %q, want the reason", n.OfflineDetail)
	}
	if r := gw.Refusals(); r[refusedFlood] != 1 {
		t.Errorf("refusals %v, want heartbeat_flood=1", r)
	}
	if n := logs.count("node refused", "reason=heartbeat_flood", "node=flood"); n != 1 {
		t.Errorf("%d log lines about the flood, want 1", n)
	}
	st, err := gw.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.Summary, "heartbeat_flood=1") || !strings.Contains(st.Summary, fmt.Sprintf("%d heartbeats dropped", gw.guard.dropped.Load())) {
		t.Errorf("status summary %q: want the refusal and the dropped heartbeats counted", st.Summary)
	}
	if page := getRefusedPage(t, gw); page.Refused[refusedFlood] != 1 || page.HeartbeatsDropped != gw.guard.dropped.Load() {
		t.Errorf("status page %+v: want heartbeat_flood=1 and %d dropped", page, dropped)
	}
	checkGoodNodeVotes(t, gw)
}

// TestWrongTokenThrottled: one address trying wrong tokens gets
// AuthFailureBurst+1 refusals that look at the token; then it is cut off
// for AuthBackoff: the connection it failed on is closed, its new
// connections are closed as soon as accepted (the right token does not
// help), and no token is looked at. It is logged twice (the first refusal
// and the cut-off) while the clock stands still; after the back-off the
// next refusal is logged with the count of those suppressed. No log line
// shows a token; the node attached before from the same address keeps
// voting.
func TestWrongTokenThrottled(t *testing.T) {
	clk := newTestClock()
	var logs logBuffer
	gw := startGateway(t, map[string]any{"status_listen": "127.0.0.1:0"}, withClock(clk), withLog(t, &logs))
	startAgent(t, gw.Addr().String(), "good", withProber(fastProber))
	awaitOnline(t, gw, 1)
	cc := dial(t, gw.Addr().String())

	const attempts = 50
	got := map[codes.Code]int{}
	for range attempts {
		got[tryAttach(t, cc, "guess-"+testToken[:3], "intruder")]++
	}
	// The last attempt that looks at the token closes the connection: its
	// answer may be lost.
	if u := got[codes.Unauthenticated]; u < AuthFailureBurst || u > AuthFailureBurst+1 || u+got[codes.Unavailable]+got[codes.ResourceExhausted] != attempts {
		t.Errorf("answers %v: want %d Unauthenticated, then Unavailable or ResourceExhausted", got, AuthFailureBurst+1)
	}
	r := gw.Refusals()
	if r[refusedWrongToken] != AuthFailureBurst+1 {
		t.Errorf("refusals %v: want wrong_token=%d (then no token looked at)", r, AuthFailureBurst+1)
	}
	// Cut off, the right token is refused too, on a new connection.
	if code := tryAttach(t, dial(t, gw.Addr().String()), testToken, "late"); code != codes.Unavailable && code != codes.ResourceExhausted {
		t.Errorf("the right token from a cut-off address: %v, want Unavailable or ResourceExhausted", code)
	}
	r2 := gw.Refusals()
	if r2[refusedCutOff] <= r[refusedCutOff] {
		t.Errorf("refusals %v: the new connection was not refused as cut off", r2)
	}
	if n := logs.count("node refused", "peer=127.0.0.1"); n != 2 {
		t.Errorf("%d log lines about the address, want 2 (first refusal, cut-off)", n)
	}
	if n := logs.count("cut off after", "reason=wrong_token"); n != 1 {
		t.Errorf("%d cut-off lines, want 1", n)
	}
	if page := getRefusedPage(t, gw); page.Refused[refusedWrongToken] != AuthFailureBurst+1 || page.Refused[refusedCutOff] != r2[refusedCutOff] {
		t.Errorf("status page refused %v, want %v", page.Refused, r2)
	}
	checkGoodNodeVotes(t, gw)

	// The clock moves on past the back-off (the good node, heard from
	// before, now looks offline: it is not asked again below).
	clk.Advance(AuthBackoff + RefusalLogInterval)
	if code := tryAttach(t, dial(t, gw.Addr().String()), "wrong", "intruder"); code != codes.Unauthenticated {
		t.Errorf("after the back-off: %v, want Unauthenticated (looked at again)", code)
	}
	// The clients' own reconnects may have added cut_off refusals since
	// r2 was read: the count is not checked exactly.
	want := "suppressed_reasons=cut_off="
	if n := logs.count("node refused", "reason=wrong_token", want); n != 1 {
		t.Errorf("%d lines with %s after the interval, want 1:\n%s", n, want, strings.Join(logs.lines, "\n"))
	}
	s := openStream(t, dial(t, gw.Addr().String()), testToken)
	if err := s.Send(helloMsg("late")); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Recv(); err != nil || m.GetWelcome() == nil {
		t.Errorf("the right token after the back-off: %v %v, want a welcome", m, err)
	}
	if n := logs.count(testToken); n != 0 {
		t.Errorf("%d log lines show the token", n)
	}
}

// TestMalformedHello: each malformed first message is refused with its
// own error, counted as bad_hello, and charged to the address.
func TestMalformedHello(t *testing.T) {
	gw := startGateway(t, nil, withClock(newTestClock()))
	cc := dial(t, gw.Addr().String())
	tests := []struct {
		name string
		msg  *pb.NodeMessage
		want codes.Code
	}{
		{"heartbeat first", heartbeatMsg, codes.InvalidArgument},
		{"invalid id", helloMsg("has space"), codes.InvalidArgument},
		{"bad labels", &pb.NodeMessage{Msg: &pb.NodeMessage_Hello{Hello: &pb.Hello{NodeId: "x", ProtocolVersion: ProtocolVersion, Labels: map[string]string{"": "v"}}}}, codes.InvalidArgument},
		{"other protocol", &pb.NodeMessage{Msg: &pb.NodeMessage_Hello{Hello: &pb.Hello{NodeId: "x", ProtocolVersion: 99}}}, codes.FailedPrecondition},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStream(t, cc, testToken)
			if err := s.Send(tt.msg); err != nil {
				t.Fatal(err)
			}
			if code := endOf(t, s); code != tt.want {
				t.Errorf("code %v, want %v", code, tt.want)
			}
			if n := gw.Refusals()[refusedBadHello]; n != uint64(i+1) {
				t.Errorf("bad_hello counted %d, want %d", n, i+1)
			}
		})
	}
}

// TestHeartbeatLimit: the limit lets a vigil-node's pace and ten times it
// through, passive reports at the agent's fastest (one per 250ms poll)
// beside, drops a faster one, and disconnects a flood.
func TestHeartbeatLimit(t *testing.T) {
	const timeout = DefaultOnlineTimeout
	tests := []struct {
		name      string
		every     time.Duration
		reports   time.Duration // a passive report every (0: none)
		wantDrops bool
		wantFlood bool
	}{
		{"vigil-node pace", timeout / 3, 0, false, false},
		{"vigil-node pace with passive reports every poll", timeout / 3, 250 * time.Millisecond, false, false},
		{"the limit", timeout / HeartbeatsPerTimeout, 0, false, false},
		{"the limit, with the report limit", timeout / HeartbeatsPerTimeout, time.Second / PassiveReportsPerSecond, false, false},
		{"twice the limit", timeout / HeartbeatsPerTimeout / 2, 0, true, false},
		{"reports twice their limit", timeout / 3, time.Second / PassiveReportsPerSecond / 2, true, false},
		{"a flood", time.Microsecond, 0, true, true},
		{"a flood of reports", timeout / 3, time.Microsecond, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHeartbeatLimit(timeout)
			start := time.Unix(1e9, 0)
			nextBeat, nextReport := start, start
			drops, flood := 0, false
			for range 20000 {
				now, report := nextBeat, false
				if tt.reports > 0 && nextReport.Before(nextBeat) {
					now, report = nextReport, true
					nextReport = nextReport.Add(tt.reports)
				} else {
					nextBeat = nextBeat.Add(tt.every)
				}
				ok, f := h.admit(now, report)
				if !ok {
					drops++
				}
				if f {
					flood = true
					break
				}
			}
			if drops > 0 != tt.wantDrops || flood != tt.wantFlood {
				t.Errorf("drops %d, flood %v; want drops %v, flood %v", drops, flood, tt.wantDrops, tt.wantFlood)
			}
		})
	}
}

// TestPeerStateBounded: the per-address state stays within maxPeers, the
// least recently refused address forgotten first.
func TestPeerStateBounded(t *testing.T) {
	now := time.Unix(1e9, 0)
	g := newGuard(func() hclog.Logger { return hclog.NewNullLogger() }, func() time.Time { return now })
	g.maxPeers = 3
	for i := range 5 {
		g.refuse(fmt.Sprintf("10.0.0.%d", i), "", "", refusedWrongToken, "wrong token", true)
	}
	if len(g.peers) != 3 || g.order.Len() != 3 {
		t.Fatalf("%d peers kept, want 3", len(g.peers))
	}
	for _, k := range []string{"10.0.0.2", "10.0.0.3", "10.0.0.4"} {
		if g.peers[k] == nil {
			t.Errorf("%s forgotten; want the oldest ones forgotten first (kept %v)", k, g.peers)
		}
	}
	if g.counts()[refusedWrongToken] != 5 {
		t.Errorf("counts %v", g.counts())
	}
}

func TestPeerKey(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"127.0.0.1:5000", "127.0.0.1"},
		{"[::ffff:127.0.0.1]:5000", "127.0.0.1"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			addr, err := net.ResolveTCPAddr("tcp", tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			if got := peerKey(addr); got != tt.want {
				t.Errorf("peerKey(%s) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}

// TestBadCertificates: with mTLS, a client certificate another CA signed,
// none at all, or one naming another node id is a failed attempt
// (bad_certificate) of the address, logged; a bare TCP connection that
// closes before its handshake (a port scan) is not counted.
func TestBadCertificates(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := writePEM(t, dir, "gateway", ca.issue(t, "gateway", true))
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	gw := startGateway(t, map[string]any{"tls_cert_file": certFile, "tls_key_file": keyFile, "client_ca_file": caFile},
		withClock(newTestClock()), withLog(t, &logs), func(s *Source) { s.guard.burst = 100 })
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	// A port scan: connect, close.
	c, err := net.Dial("tcp", gw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()

	tests := []struct {
		name   string
		certs  []tls.Certificate
		id     string
		want   codes.Code
		detail string
	}{
		{"another CA", []tls.Certificate{other.issue(t, "edge-1", false)}, "edge-1", codes.Unavailable, "not signed by client_ca_file"},
		{"no certificate", nil, "edge-1", codes.Unavailable, "no client certificate"},
		{"another node's", []tls.Certificate{ca.issue(t, "edge-9", false)}, "edge-1", codes.PermissionDenied, "does not name this node id"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creds := credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: tt.certs, MinVersion: tls.VersionTLS12})
			cc, err := grpc.NewClient("passthrough:///"+gw.Addr().String(), grpc.WithTransportCredentials(creds))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cc.Close() })
			if code := tryAttach(t, cc, testToken, tt.id); code != tt.want {
				t.Errorf("code %v, want %v", code, tt.want)
			}
			// The gateway counts before it answers; a failed handshake
			// may reach the client first: wait for the count.
			deadline := time.Now().Add(hangGuard)
			for gw.Refusals()[refusedBadCert] != uint64(i+1) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := gw.Refusals()[refusedBadCert]; n != uint64(i+1) {
				t.Errorf("bad_certificate counted %d, want %d (a port scan not counted)", n, i+1)
			}
			if n := logs.count(tt.detail); i == 0 && n != 1 {
				t.Errorf("%d log lines saying %q, want 1", n, tt.detail)
			}
		})
	}
}

// TestHeartbeatsDroppedShown: a node a little over its limit keeps its
// stream; its dropped heartbeats show in its status detail and on the
// status page.
func TestHeartbeatsDroppedShown(t *testing.T) {
	gw := startGateway(t, map[string]any{"status_listen": "127.0.0.1:0"}, withClock(newTestClock()))
	n := attachRaw(t, gw.Addr().String(), "eager", nil)
	const over = 5
	for range HeartbeatBurst + over {
		if err := n.stream.Send(heartbeatMsg); err != nil {
			t.Fatal(err)
		}
	}
	gw.reg.mu.Lock()
	c := gw.reg.nodes["eager"]
	gw.reg.mu.Unlock()
	deadline := time.Now().Add(hangGuard) // catches a hang only
	for c.unsolicited.Load() < HeartbeatBurst+over && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	st, err := gw.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d heartbeats dropped over its limit", over)
	if len(st.Items) != 1 || st.Items[0].State != "online" || !strings.Contains(st.Items[0].Detail, want) {
		t.Errorf("status items %+v: want eager online, its detail saying %q", st.Items, want)
	}
	if p := getStatusPage(t, gw); len(p.Nodes) != 1 || p.Nodes[0].HeartbeatsDropped != over {
		t.Errorf("status page nodes %+v: want eager with %d heartbeats dropped", p.Nodes, over)
	}
}

// TestSilentConnectionClosed: a TCP connection that never starts its
// HTTP/2 (or TLS) handshake is closed after hello_timeout.
func TestSilentConnectionClosed(t *testing.T) {
	gw := startGateway(t, map[string]any{"hello_timeout": 200 * time.Millisecond})
	c, err := net.Dial("tcp", gw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(hangGuard)) // catches a hang only
	buf := make([]byte, 64)
	for {
		_, err := c.Read(buf) // the server's settings frame may come first
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection was still open after %s", hangGuard)
		}
		return // closed by the gateway
	}
}
