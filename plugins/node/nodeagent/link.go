package nodeagent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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

// The protocol features this agent announces in its hello (see the
// nodegateway.proto header): it runs the jobs' probe settings, and it can
// flag the jobs it did not run.
const (
	featureProbeSettings = "probe_settings"
	featureNotRun        = "not_run"
	// featurePassive: the node keeps passive windows (it proxies) and, to a
	// gateway announcing it, sends them in ProbeResult.passive.
	featurePassive = "passive"
	// featurePassiveTrigger: the node keeps passive windows and, to a
	// gateway announcing it, sends a PassiveReport as soon as an origin's
	// window gains failures and trips the gateway's rule, between batches.
	featurePassiveTrigger = "passive_trigger"
)

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
	addr string // the gateway's host:port
	conn *grpc.ClientConn
}

// newLink is the link to the gateway at addr (one of Config.Gateway's).
func newLink(a *Agent, addr string) (*link, error) {
	cfg := &a.cfg
	creds := insecure.NewCredentials()
	if a.gatewayCreds != nil {
		creds = a.gatewayCreds
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)),
	}
	if cfg.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenCreds{token: cfg.Token, secure: cfg.GatewayTLS != nil}))
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", addr, err)
	}
	return &link{a: a, addr: addr, conn: conn}, nil
}

// run attaches to the gateway until ctx ends, reconnecting with
// exponential backoff and jitter (newBackOff); a session the gateway
// welcomed starts the backoff again from MinBackoff.
func (l *link) run(ctx context.Context) {
	defer l.conn.Close()
	b := l.a.backOff()
	for ctx.Err() == nil {
		attached, err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if attached {
			b.Reset()
		}
		wait := b.NextBackOff()
		if refused(err) {
			l.a.log.Error("the gateway refused this node", "gateway", l.addr, "error", err)
			l.a.event(Event{Kind: EventRefused, Err: err})
		} else {
			l.a.log.Warn("not attached to the gateway; retrying", "gateway", l.addr, "error", err, "in", wait.Round(time.Millisecond).String())
			l.a.event(Event{Kind: EventDetached, Err: err})
		}
		if !sleepUntil(ctx, time.Now().Add(wait)) {
			return
		}
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
	features := []string{featureProbeSettings, featureNotRun}
	if l.a.passive != nil {
		features = append(features, featurePassive, featurePassiveTrigger)
	}
	hello := &pb.Hello{NodeId: cfg.ID, Labels: cfg.Labels, AgentVersion: Version, ProtocolVersion: gatewayProtocol,
		Features: features}
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
	// A gateway that does not read ProbeResult.not_run would take a job
	// reported not run for a down: to such a gateway, leave them out.
	reportNotRun := slices.Contains(welcome.GetFeatures(), featureNotRun)
	// Passive windows go only to a gateway that opted in to passive votes.
	sendPassive := l.a.passive != nil && slices.Contains(welcome.GetFeatures(), featurePassive)
	// Unsolicited passive reports go only to a gateway that reads them.
	var trig *trigger
	if l.a.passive != nil && slices.Contains(welcome.GetFeatures(), featurePassiveTrigger) {
		trig = newTrigger(l.a.passive.result, time.Now)
		trig.minRequests, trig.failureRatio = welcome.GetPassiveMinRequests(), welcome.GetPassiveFailureRatio()
	}
	every := time.Duration(welcome.GetHeartbeatIntervalMs()) * time.Millisecond
	if every <= 0 {
		every = 5 * time.Second
	}
	l.a.log.Info("attached to the gateway", "gateway", l.addr, "node", cfg.ID, "heartbeat", every.String(), "passive", sendPassive,
		"passive_trigger", trig != nil)
	l.a.metrics.attached.Inc()
	defer l.a.metrics.attached.Dec()
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
	if trig != nil {
		wg.Go(func() {
			t := time.NewTicker(triggerPoll)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				rep := trig.poll()
				if rep == nil {
					continue
				}
				l.a.log.Debug("passive windows gained failures: reporting them to the gateway now", "origins", len(rep.GetOrigins()))
				if err := send(&pb.NodeMessage{Msg: &pb.NodeMessage_PassiveReport{PassiveReport: rep}}); err != nil {
					cancel()
					return
				}
			}
		})
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return true, fmt.Errorf("gateway stream: %w", err)
		}
		batch := m.GetBatch()
		if batch == nil {
			continue
		}
		if trig != nil {
			trig.track(batch)
		}
		received := time.Now()
		wg.Go(func() {
			res := l.a.runBatch(ctx, batch, received, reportNotRun)
			if sendPassive {
				l.a.attachPassive(batch, res)
			}
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

// errBatchDeadline ends a batch's probes when its time is up.
var errBatchDeadline = errors.New("the batch's time ran out")

// The reasons of a job reported not run (ProbeResult.reason with not_run).
const (
	notRunOutOfTime   = "out_of_time"  // the batch's time ran out first
	notRunUnsupported = "unsupported"  // the node could not build the probe
	notRunPassiveOnly = "passive_only" // a ProbeJob.passive_only: no probe asked
)

// batchPlan is how the jobs of one batch are run.
type batchPlan struct {
	order   []int           // the jobs in the order they start
	starts  []time.Duration // when order[k] starts, counted from the batch's start
	spread  time.Duration   // the starts fall within this
	workers int             // jobs waiting for their start or in flight at once, taken in order
	needed  int             // probes in flight it takes for every job to end in time, each using its whole timeout
}

// planBatch works out the order, the starts and the workers of a batch
// with window to run in. The order is shuffled per batch, with the jobs
// the previous batch cut first; the starts are spread evenly over a part
// of the window (Config.Spread), each at a random time within its slot,
// leaving the longest job's timeout room to end.
func (a *Agent) planBatch(jobs []*pb.ProbeJob, window time.Duration) batchPlan {
	n := len(jobs)
	p := batchPlan{order: rand.Perm(n), starts: make([]time.Duration, n)}
	a.mu.Lock()
	cut := a.cut
	a.mu.Unlock()
	if len(cut) > 0 {
		first := make([]int, 0, len(cut))
		rest := make([]int, 0, n)
		for _, i := range p.order {
			if cut[jobKey(jobs[i])] {
				first = append(first, i)
			} else {
				rest = append(rest, i)
			}
		}
		p.order = append(first, rest...)
	}
	longest := time.Duration(0)
	for _, j := range jobs {
		longest = max(longest, jobTimeout(j))
	}
	if a.cfg.Spread > 0 {
		p.spread = max(0, min(time.Duration(float64(window)*a.cfg.Spread), window-longest))
	}
	for k := range p.starts {
		p.starts[k] = time.Duration((float64(k) + rand.Float64()) * float64(p.spread) / float64(n))
	}
	perWorker := 1
	if longest > 0 && window > longest {
		perWorker = int(window / longest)
	}
	p.needed = (n + perWorker - 1) / perWorker
	p.workers = max(1, min(n, a.MaxInFlight()))
	return p
}

// jobKey identifies a job's origin from one batch to the next.
func jobKey(j *pb.ProbeJob) string {
	return j.GetAddress() + "\x00" + j.GetHost() + "\x00" + j.GetPath()
}

func jobTimeout(j *pb.ProbeJob) time.Duration {
	if d := time.Duration(j.GetTimeoutNs()); d > 0 {
		return d
	}
	return probe.DefaultTimeout
}

// runBatch runs a batch's jobs and answers, a little before the batch's
// budget ends, with a result for every job. Every job may be in flight at
// once, up to MaxInFlight over all batches; the starts are spread as
// planBatch says. A job that could not start in time, or whose probe the
// batch's deadline interrupted, is reported not run (out_of_time), never as
// a down: a timeout shortened by the deadline is no verdict. When the
// gateway does not read not_run (reportNotRun false), such jobs are left
// out of the answer instead.
func (a *Agent) runBatch(ctx context.Context, b *pb.Batch, received time.Time, reportNotRun bool) *pb.BatchResult {
	budget := time.Duration(b.GetBudgetMs()) * time.Millisecond
	if budget <= 0 {
		budget = defaultBudget
	}
	// Keep a tenth (at most half a second) to get the answer back.
	deadline := received.Add(budget - min(budget/10, 500*time.Millisecond))
	// The deadline cancels ctx rather than being ctx's deadline: a probe's
	// connection would otherwise inherit it as a socket deadline, which
	// can fire a moment before ctx reports the end, and the probe would
	// take the cut for a connection failure, a false down. Cancelled, ctx
	// is done before the probe's connection sees anything.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := time.AfterFunc(time.Until(deadline), func() { cancel(errBatchDeadline) })
	defer stop.Stop()
	out := &pb.BatchResult{BatchId: b.GetBatchId()}
	jobs := b.GetJobs()
	if len(jobs) == 0 {
		return out
	}
	roots := a.batchRoots(b)
	start := time.Now()
	p := a.planBatch(jobs, deadline.Sub(start))

	var mu sync.Mutex // guards results, started and closed
	results := make([]*pb.ProbeResult, len(jobs))
	started := make([]bool, len(jobs))
	closed := false
	// job runs the k-th job of the order at its start, with a token of
	// a.inFlight (the bound over every batch); one the batch's time cut
	// before it ended leaves no result.
	job := func(k int) {
		if i := p.order[k]; jobs[i].GetPassiveOnly() {
			// No probe: the passive window is attached by attachPassive.
			mu.Lock()
			started[i], results[i] = true, &pb.ProbeResult{Job: uint32(i), NotRun: true, Reason: notRunPassiveOnly}
			mu.Unlock()
			return
		}
		if !sleepUntil(ctx, start.Add(p.starts[k])) {
			return // reported out of time below
		}
		select {
		case a.inFlight <- struct{}{}:
		case <-ctx.Done():
			return
		}
		i := p.order[k]
		mu.Lock()
		started[i] = true
		mu.Unlock()
		res, err := a.cfg.Prober(ctx, request(jobs[i], roots, a.probeRootCAs()))
		<-a.inFlight
		var r *pb.ProbeResult
		switch {
		case err != nil && ctx.Err() != nil:
			return // interrupted by the batch's deadline: out of time, below
		case err != nil:
			r = &pb.ProbeResult{Job: uint32(i), NotRun: true, Reason: notRunUnsupported, Detail: clip(err.Error())}
		default:
			r = &pb.ProbeResult{Job: uint32(i), Up: res.Up, Reason: res.Reason.String(), Detail: res.Detail, LatencyNs: int64(res.Latency),
				StatusCode: int32(res.Status), ResolveNs: int64(res.Timings.DNS), ConnectNs: int64(res.Timings.Connect), TlsNs: int64(res.Timings.TLS),
				ProcessingNs: int64(res.Timings.Headers), TransferNs: int64(res.Timings.Body)}
			if !res.CertNotAfter.IsZero() {
				r.CertNotAfterUnix = res.CertNotAfter.Unix()
			}
		}
		mu.Lock()
		if !closed {
			results[i] = r
		}
		mu.Unlock()
	}
	// At most p.workers jobs wait for their start or run at once, started
	// in order. A plain Group (no WithContext): a failed probe cancels no
	// other. The jobs are handed out from a goroutine so that the answer
	// can go at the deadline even while every slot is held by a probe that
	// ignores it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		var g errgroup.Group
		g.SetLimit(p.workers)
		for k := range p.order {
			if ctx.Err() != nil {
				break // the rest are reported out of time below
			}
			g.Go(func() error {
				job(k)
				return nil
			})
		}
		_ = g.Wait() // every func returns nil
	}()
	// Answer when every job is done, or at the deadline with what is done
	// (a probe that ignores its deadline must not cost the others' votes).
	select {
	case <-done:
	case <-ctx.Done():
	}
	mu.Lock()
	closed = true
	cut := map[string]bool{}
	var up, down, outOfTime, invalid int
	var invalidErr string
	for i, r := range results {
		switch {
		case r == nil:
			why := "the batch's time ran out before its turn"
			switch {
			case context.Cause(ctx) != errBatchDeadline:
				why = "the node stopped or lost the gateway before the job ended"
			case started[i]:
				why = fmt.Sprintf("the batch's deadline interrupted its probe (timeout %s)", jobTimeout(jobs[i]))
			}
			r = &pb.ProbeResult{Job: uint32(i), NotRun: true, Reason: notRunOutOfTime, Detail: why}
			cut[jobKey(jobs[i])] = true
			outOfTime++
		case r.GetReason() == notRunPassiveOnly:
		case r.GetNotRun():
			invalid++
			invalidErr = r.GetDetail()
		case r.GetUp():
			up++
		default:
			down++
		}
		if !r.GetNotRun() || reportNotRun {
			out.Results = append(out.Results, r)
		}
	}
	mu.Unlock()
	a.mu.Lock()
	a.cut = cut
	a.mu.Unlock()
	a.metrics.jobs.WithLabelValues("up").Add(float64(up))
	a.metrics.jobs.WithLabelValues("down").Add(float64(down))
	a.metrics.jobs.WithLabelValues("not_run").Add(float64(outOfTime))
	a.metrics.jobs.WithLabelValues("invalid").Add(float64(invalid))
	if outOfTime > 0 || invalid > 0 {
		args := []any{"batch", b.GetBatchId(), "round", b.GetRound(), "jobs", len(jobs), "out_of_time", outOfTime, "invalid", invalid,
			"in_flight_max", p.workers, "in_flight_needed", p.needed, "spread", p.spread.Round(time.Millisecond),
			"budget", budget.String(), "took", time.Since(start).Round(time.Millisecond).String()}
		if invalid > 0 {
			args = append(args, "invalid_error", invalidErr)
		}
		if !reportNotRun {
			args = append(args, "reported", "left out: the gateway predates not_run")
		}
		a.log.Warn("some probe jobs were not run", args...)
	}
	return out
}

// attachPassive adds to each result the passive window of its job's origin
// (none when the node sent no request there within the window).
func (a *Agent) attachPassive(b *pb.Batch, res *pb.BatchResult) {
	jobs := b.GetJobs()
	for _, r := range res.GetResults() {
		if int(r.GetJob()) < len(jobs) {
			r.Passive = a.passive.result(jobs[r.GetJob()].GetAddress())
		}
	}
}

// batchRoots builds the certificate pools of the CA bundles a batch
// carries. A job naming a bundle that is missing or unusable is checked
// against the node's own roots (Config.ProbeRootCAs, or the system's), as
// the direct source does; the problem is logged.
func (a *Agent) batchRoots(b *pb.Batch) map[string]*x509.CertPool {
	roots, err := probe.Roots(b.GetCas())
	if err != nil {
		a.log.Warn("a CA bundle of the batch is unusable; its jobs are checked against the node's roots", "batch", b.GetBatchId(), "error", err)
	}
	for _, j := range b.GetJobs() {
		if ca := j.GetCa(); ca != "" {
			if _, ok := b.GetCas()[ca]; !ok {
				a.log.Warn("a job names a CA bundle the batch does not carry (vigil sent none by that name, or the gateway predates CA bundles: upgrade it); it is checked against the node's roots",
					"batch", b.GetBatchId(), "ca", ca)
				break
			}
		}
	}
	return roots
}

// request is the probe of a job: the equivalent of the direct source's.
func request(j *pb.ProbeJob, roots map[string]*x509.CertPool, fallback *x509.CertPool) probe.Request {
	r := probe.Request{
		Address:            j.GetAddress(),
		Host:               j.GetHost(),
		Path:               j.GetPath(),
		Timeout:            time.Duration(j.GetTimeoutNs()),
		UserAgent:          j.GetUserAgent(),
		ExpectedBody:       j.GetExpectedBody(),
		MaxLatency:         time.Duration(j.GetMaxLatencyNs()),
		ServerName:         j.GetTlsServerName(),
		InsecureSkipVerify: j.GetInsecureSkipVerify(),
		FollowRedirects:    j.GetFollowRedirects(),
		MaxBody:            j.GetMaxBody(),
		RootCAs:            fallback,
	}
	if pool, ok := roots[j.GetCa()]; ok && j.GetCa() != "" {
		r.RootCAs = pool
	}
	for _, s := range j.GetExpectedStatuses() {
		r.ExpectedStatuses = append(r.ExpectedStatuses, int(s))
	}
	if h := j.GetHeaders(); len(h) > 0 {
		r.Header = make(http.Header, len(h))
		for k, v := range h {
			r.Header[k] = []string{v}
		}
	}
	return r
}

// sleepUntil waits until t, or less when ctx ends first (then it reports
// false).
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// The passive trigger's bounds: how often the node looks at the windows of
// the origins it was asked about, how often it reports one origin, how
// many origins one report carries, how many origins it watches, and how
// long it keeps watching an origin no batch named.
const (
	triggerPoll       = 250 * time.Millisecond
	triggerEvery      = time.Second
	triggerBatch      = 64
	triggerMaxOrigins = 10000
	triggerForget     = 10 * time.Minute
)

// trigger watches the passive windows of the origins the gateway asked
// about (the addresses of the batches' jobs) and tells which ones gained
// failures since it last looked and trip the gateway's passive vote rule:
// the node reports those to the gateway at once instead of waiting for the
// next batch. An origin is reported at most once per triggerEvery, with
// its window as it is then, and a report held back by that bound goes
// with the next look that allows it (if its window still trips).
type trigger struct {
	look func(address string) *pb.PassiveResult
	now  func() time.Time
	// minRequests and failureRatio are the gateway's passive vote rule
	// (from its welcome): a window is reported only once it trips it.
	// failureRatio 0: any window that gained failures is.
	minRequests  uint32
	failureRatio float64

	mu      sync.Mutex
	origins map[string]*watched
}

// watched is one origin the trigger watches.
type watched struct {
	asked    time.Time // last named by a batch
	failures uint32    // failures and slow answers in the window at the last look
	reported time.Time // last reported
	pending  bool      // gained failures, not reported yet
}

func newTrigger(look func(string) *pb.PassiveResult, now func() time.Time) *trigger {
	return &trigger{look: look, now: now, origins: map[string]*watched{}}
}

// track watches the origins of a batch's jobs.
func (t *trigger) track(b *pb.Batch) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, j := range b.GetJobs() {
		addr := j.GetAddress()
		if addr == "" {
			continue
		}
		w, ok := t.origins[addr]
		if !ok {
			if len(t.origins) >= triggerMaxOrigins {
				continue
			}
			w = &watched{}
			if r := t.look(addr); r != nil {
				w.failures = r.GetFailures() + r.GetSlow() // what came before is not news
			}
			t.origins[addr] = w
		}
		w.asked = now
	}
}

// trips reports whether window r would vote down by the gateway's rule
// (any window with a failure when the gateway sent none).
func (t *trigger) trips(r *pb.PassiveResult) bool {
	if r == nil {
		return false
	}
	failed := r.GetFailures() + r.GetSlow()
	if t.failureRatio <= 0 {
		return failed > 0
	}
	judged := int64(r.GetRequests()) - int64(r.GetIgnored())
	return judged >= int64(max(t.minRequests, 1)) && float64(failed) > t.failureRatio*float64(judged)
}

// poll looks at every watched window and returns the report to send now:
// nil, or at most triggerBatch origins (those left over stay pending for
// the next look; the map's order varies, so no origin waits for ever).
func (t *trigger) poll() *pb.PassiveReport {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var rep *pb.PassiveReport
	for addr, w := range t.origins {
		if now.Sub(w.asked) > triggerForget {
			delete(t.origins, addr)
			continue
		}
		r := t.look(addr)
		failures := r.GetFailures() + r.GetSlow()
		if failures > w.failures {
			w.pending = true
		}
		w.failures = failures
		if w.pending && !t.trips(r) {
			w.pending = false // not enough to say down: no news for the gateway
		}
		if !w.pending || now.Sub(w.reported) < triggerEvery {
			continue
		}
		if rep == nil {
			rep = &pb.PassiveReport{}
		}
		if len(rep.Origins) < triggerBatch {
			rep.Origins = append(rep.Origins, &pb.PassiveOrigin{Address: addr, Passive: r})
			w.pending, w.reported = false, now
		}
	}
	return rep
}
