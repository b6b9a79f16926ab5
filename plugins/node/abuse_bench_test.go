package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/sdk"
)

// The environment of the gateway helper process of
// BenchmarkGatewayUnderFlood: "on" or "off" (its limits).
const helperEnv = "VIGIL_TEST_GATEWAY_HELPER"

// TestGatewayHelperProcess is not a test: BenchmarkGatewayUnderFlood runs
// the test binary again with helperEnv set to get a gateway in a process
// of its own, whose CPU time it can read when it exits. It prints the
// gateway's address and serves until its stdin closes.
func TestGatewayHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("the gateway helper process of BenchmarkGatewayUnderFlood")
	}
	src := New(hclog.NewNullLogger())
	src.guard.off = mode == "off"
	src.getenv = func(string) string { return testToken }
	if err := src.Configure(context.Background(), sdk.Config{Values: map[string]any{"listen": "127.0.0.1:0", "token_env": "T"}}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fmt.Println(src.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// helperGateway is a gateway in a process of its own.
type helperGateway struct {
	cmd   *exec.Cmd
	stdin io.Closer
	addr  string
}

func startHelperGateway(b *testing.B, limits bool) *helperGateway {
	b.Helper()
	mode := "on"
	if !limits {
		mode = "off"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGatewayHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Wait()
		b.Fatalf("gateway helper: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return &helperGateway{cmd: cmd, stdin: stdin, addr: strings.TrimSpace(line)}
}

// stop ends the helper and returns the CPU time (user and system) it used.
func (h *helperGateway) stop(b *testing.B) time.Duration {
	b.Helper()
	_ = h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		b.Fatalf("gateway helper: %v", err)
	}
	return h.cmd.ProcessState.UserTime() + h.cmd.ProcessState.SystemTime()
}

// floodHeartbeats attaches with the right token and sends heartbeats as
// fast as it can for d; whenever the gateway ends its stream or
// connection it dials again at once, on a new connection (as a persistent
// attacker would, with no backoff). It returns the heartbeats sent and the
// sessions (connections) it went through.
func floodHeartbeats(b *testing.B, addr string, d time.Duration) (sent, sessions int) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		sessions++
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		stream, err := pb.NewNodeGatewayClient(cc).Attach(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+testToken))
		if err == nil {
			err = stream.Send(helloMsg(fmt.Sprintf("flood-%d", sessions)))
		}
		for err == nil && ctx.Err() == nil {
			if err = stream.Send(heartbeatMsg); err == nil {
				sent++
			}
		}
		_ = cc.Close()
	}
	return sent, sessions
}

// floodWrongTokens tries a wrong token as fast as it can for d, one
// attempt after the other, each waiting for its refusal, and dials again
// at once, on a new connection, whenever the gateway closes its
// connection.
func floodWrongTokens(b *testing.B, addr string, d time.Duration) (attempts int) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		for ctx.Err() == nil {
			attempts++
			stream, err := pb.NewNodeGatewayClient(cc).Attach(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong"))
			if err == nil {
				_, err = stream.Recv()
			}
			if c := status.Code(err); c != codes.Unauthenticated && c != codes.ResourceExhausted {
				break // the connection is gone: dial again
			}
		}
		_ = cc.Close()
	}
	return attempts
}

// BenchmarkGatewayUnderFlood measures what a flood costs the gateway, in
// CPU time of the gateway's own process, with its limits and without them
// (side by side, same flood, same machine): one attacker on loopback
// sending heartbeats as fast as it can for floodFor, and one trying wrong
// tokens as fast as it can; both dial again at once whenever the gateway
// closes their stream or connection. An idle gateway's CPU over the same time is subtracted. Each op runs
// the four floods and the idle run; the figures are per second of flood.
//
//	go test -run '^$' -bench GatewayUnderFlood -benchtime 1x ./plugins/node
func BenchmarkGatewayUnderFlood(b *testing.B) {
	const floodFor = 2 * time.Second
	var idle, hbOn, hbOff, tokOn, tokOff time.Duration
	var sentOn, sentOff, triesOn, triesOff, sessOn int
	for b.Loop() {
		h := startHelperGateway(b, true)
		time.Sleep(floodFor)
		idle += h.stop(b)

		h = startHelperGateway(b, true)
		s, n := floodHeartbeats(b, h.addr, floodFor)
		sentOn, sessOn = sentOn+s, sessOn+n
		hbOn += h.stop(b)

		h = startHelperGateway(b, false)
		s, _ = floodHeartbeats(b, h.addr, floodFor)
		sentOff += s
		hbOff += h.stop(b)

		h = startHelperGateway(b, true)
		triesOn += floodWrongTokens(b, h.addr, floodFor)
		tokOn += h.stop(b)

		h = startHelperGateway(b, false)
		triesOff += floodWrongTokens(b, h.addr, floodFor)
		tokOff += h.stop(b)
	}
	secs := floodFor.Seconds() * float64(b.N)
	perSec := func(cpu time.Duration) float64 { return max(cpu-idle, 0).Seconds() * 1000 / secs }
	b.ReportMetric(perSec(hbOff), "hb-flood-cpu-ms/s-nolimits")
	b.ReportMetric(perSec(hbOn), "hb-flood-cpu-ms/s-limits")
	b.ReportMetric(perSec(hbOff)/max(perSec(hbOn), 1e-3), "hb-flood-cpu-ratio")
	b.ReportMetric(float64(sentOff)/secs, "hb-sent/s-nolimits")
	b.ReportMetric(float64(sentOn)/secs, "hb-sent/s-limits")
	b.ReportMetric(float64(sessOn)/secs, "hb-redials/s-limits")
	b.ReportMetric(perSec(hbOff)*1000*secs/max(float64(sentOff), 1), "cpu-us/heartbeat-nolimits")
	b.ReportMetric(perSec(hbOn)*1000*secs/max(float64(sessOn), 1), "cpu-us/redial-limits")
	b.ReportMetric(perSec(tokOff), "token-flood-cpu-ms/s-nolimits")
	b.ReportMetric(perSec(tokOn), "token-flood-cpu-ms/s-limits")
	b.ReportMetric(perSec(tokOff)/max(perSec(tokOn), 1e-3), "token-flood-cpu-ratio")
	b.ReportMetric(float64(triesOff)/secs, "token-tries/s-nolimits")
	b.ReportMetric(float64(triesOn)/secs, "token-tries/s-limits")
	b.ReportMetric(idle.Seconds()*1000/float64(b.N), "idle-gateway-cpu-ms")
}
