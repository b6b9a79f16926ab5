package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/sdk/probe"
)

// gatewayProtocol is the gateway protocol version this agent speaks.
const gatewayProtocol = 1

// maxMessage bounds one gateway message.
const maxMessage = 16 << 20

// defaultBudget is a batch's budget when the gateway sets none.
const defaultBudget = 30 * time.Second

// tokenCreds sends the shared token with every call.
type tokenCreds struct {
	token  string
	secure bool
}

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + t.token}, nil
}

func (t tokenCreds) RequireTransportSecurity() bool { return t.secure }

// link is the agent's connection to the gateway.
type link struct {
	a    *Agent
	conn *grpc.ClientConn
}

func newLink(a *Agent) (*link, error) {
	cfg := &a.cfg
	creds := insecure.NewCredentials()
	if cfg.GatewayTLS != nil {
		creds = credentials.NewTLS(cfg.GatewayTLS)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)),
	}
	if cfg.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenCreds{token: cfg.Token, secure: cfg.GatewayTLS != nil}))
	}
	conn, err := grpc.NewClient("passthrough:///"+cfg.Gateway, opts...)
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", cfg.Gateway, err)
	}
	return &link{a: a, conn: conn}, nil
}

// run attaches to the gateway until ctx ends, reconnecting with
// exponential backoff and jitter.
func (l *link) run(ctx context.Context) {
	defer l.conn.Close()
	cfg := &l.a.cfg
	backoff := cfg.MinBackoff
	for ctx.Err() == nil {
		attached, err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if attached {
			backoff = cfg.MinBackoff
		}
		if refused(err) {
			l.a.log.Error("the gateway refused this node", "gateway", cfg.Gateway, "error", err)
			l.a.event(Event{Kind: EventRefused, Err: err})
		} else {
			l.a.log.Warn("not attached to the gateway; retrying", "gateway", cfg.Gateway, "error", err, "in", backoff.String())
			l.a.event(Event{Kind: EventDetached, Err: err})
		}
		// Equal jitter: wait between half and all of the backoff, so that
		// nodes cut off together do not come back in one burst.
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(backoff*2, cfg.MaxBackoff)
	}
}

// refused reports whether the gateway turned the node away (as opposed to
// a network problem).
func refused(err error) bool {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.AlreadyExists, codes.InvalidArgument, codes.FailedPrecondition:
		return true
	}
	return false
}

// session runs one Attach stream. attached says whether the gateway
// welcomed the node.
func (l *link) session(ctx context.Context) (attached bool, err error) {
	cfg := &l.a.cfg
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewNodeGatewayClient(l.conn).Attach(ctx)
	if err != nil {
		return false, fmt.Errorf("attaching: %w", err)
	}
	var sendMu sync.Mutex
	send := func(m *pb.NodeMessage) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	hello := &pb.Hello{NodeId: cfg.ID, Labels: cfg.Labels, AgentVersion: Version, ProtocolVersion: gatewayProtocol}
	if err := send(&pb.NodeMessage{Msg: &pb.NodeMessage_Hello{Hello: hello}}); err != nil {
		return false, fmt.Errorf("saying hello: %w", recvErr(stream, err))
	}
	first, err := stream.Recv()
	if err != nil {
		return false, fmt.Errorf("waiting for the welcome: %w", err)
	}
	welcome := first.GetWelcome()
	if welcome == nil {
		return false, errors.New("the gateway did not answer the hello with a welcome: is -gateway the vigil-source-node address?")
	}
	every := time.Duration(welcome.GetHeartbeatIntervalMs()) * time.Millisecond
	if every <= 0 {
		every = 5 * time.Second
	}
	l.a.log.Info("attached to the gateway", "gateway", cfg.Gateway, "node", cfg.ID, "heartbeat", every.String())
	l.a.metrics.attached.Set(1)
	defer l.a.metrics.attached.Set(0)
	l.a.event(Event{Kind: EventAttached})

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := send(&pb.NodeMessage{Msg: &pb.NodeMessage_Heartbeat{Heartbeat: &pb.Heartbeat{}}}); err != nil {
					cancel()
					return
				}
			}
		}
	})
	for {
		m, err := stream.Recv()
		if err != nil {
			return true, fmt.Errorf("gateway stream: %w", err)
		}
		batch := m.GetBatch()
		if batch == nil {
			continue
		}
		received := time.Now()
		wg.Go(func() {
			res := l.a.runBatch(ctx, batch, received)
			if err := send(&pb.NodeMessage{Msg: &pb.NodeMessage_Result{Result: res}}); err != nil {
				l.a.log.Warn("could not send batch results", "batch", batch.GetBatchId(), "error", err)
				cancel()
			}
		})
	}
}

// recvErr returns the stream's status error when a send failed because the
// stream ended (the status says why, e.g. a refused token).
func recvErr(stream grpc.BidiStreamingClient[pb.NodeMessage, pb.GatewayMessage], err error) error {
	if _, rerr := stream.Recv(); rerr != nil {
		return rerr
	}
	return err
}

// runBatch runs a batch's jobs, at most Concurrency at once, and answers
// with the results of those that finished a little before the budget ends.
func (a *Agent) runBatch(ctx context.Context, b *pb.Batch, received time.Time) *pb.BatchResult {
	budget := time.Duration(b.GetBudgetMs()) * time.Millisecond
	if budget <= 0 {
		budget = defaultBudget
	}
	// Keep a tenth (at most half a second) to get the answer back.
	ctx, cancel := context.WithDeadline(ctx, received.Add(budget-min(budget/10, 500*time.Millisecond)))
	defer cancel()
	jobs := b.GetJobs()
	var mu sync.Mutex // guards results and closed
	results := make([]*pb.ProbeResult, len(jobs))
	closed := false
	sem := make(chan struct{}, a.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, j := range jobs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			req := probe.Request{
				Address: j.GetAddress(), Host: j.GetHost(), Path: j.GetPath(), Timeout: time.Duration(j.GetTimeoutNs()),
				UserAgent: j.GetUserAgent(), ExpectedBody: j.GetExpectedBody(), MaxLatency: time.Duration(j.GetMaxLatencyNs()),
				RootCAs: a.cfg.ProbeRootCAs,
			}
			for _, s := range j.GetExpectedStatuses() {
				req.ExpectedStatuses = append(req.ExpectedStatuses, int(s))
			}
			res, err := a.cfg.Prober(ctx, req)
			if err != nil {
				a.metrics.jobs.WithLabelValues("not_run").Inc()
				return
			}
			outcome := "down"
			if res.Up {
				outcome = "up"
			}
			a.metrics.jobs.WithLabelValues(outcome).Inc()
			mu.Lock()
			defer mu.Unlock()
			if !closed {
				results[i] = &pb.ProbeResult{Job: uint32(i), Up: res.Up, Reason: string(res.Reason), Detail: res.Detail, LatencyNs: int64(res.Latency)}
			}
		})
	}
	// Answer when every job is done, or at the deadline with what is done
	// (a probe that ignores its deadline must not cost the others' votes).
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	mu.Lock()
	closed = true
	mu.Unlock()
	out := &pb.BatchResult{BatchId: b.GetBatchId()}
	for _, r := range results {
		if r != nil {
			out.Results = append(out.Results, r)
		}
	}
	if n := len(jobs) - len(out.Results); n > 0 {
		a.log.Warn("some probe jobs gave no result", "batch", b.GetBatchId(), "jobs", len(jobs), "without_result", n)
	}
	return out
}
