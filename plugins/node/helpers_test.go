package node

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/probe"
)

const testToken = "s3cret-test-token"

// startGateway configures a gateway on loopback with the token in
// VIGIL_NODE_TOKEN and extra config values. opts change the Source before
// Configure starts it (withClock, withLog, ...).
func startGateway(t *testing.T, extra map[string]any, opts ...func(*Source)) *Source {
	t.Helper()
	src := New(hclog.New(&hclog.LoggerOptions{Name: "gateway", Level: hclog.Warn, Output: newTestOutput(t)}))
	for _, o := range opts {
		o(src)
	}
	src.getenv = func(name string) string {
		if name == "VIGIL_NODE_TOKEN" {
			return testToken
		}
		return ""
	}
	vals := map[string]any{"listen": "127.0.0.1:0", "token_env": "VIGIL_NODE_TOKEN"}
	for k, v := range extra {
		vals[k] = v
	}
	if err := src.Configure(context.Background(), sdk.Config{Values: vals}); err != nil {
		t.Fatalf("configure: %v", err)
	}
	t.Cleanup(src.Close)
	return src
}

// testAgent is an in-process vigil-node attached over real gRPC.
type testAgent struct {
	id     string
	cancel context.CancelFunc
	done   chan struct{}
	events chan nodeagent.Event
}

// kill stops the agent and waits until it has.
func (a *testAgent) kill() {
	a.cancel()
	<-a.done
}

// await returns the next event of kind, failing the test after a minute
// (a hang guard only).
func (a *testAgent) await(t *testing.T, kind nodeagent.EventKind) nodeagent.Event {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case e := <-a.events:
			if e.Kind == kind {
				return e
			}
		case <-timeout:
			t.Fatalf("agent %s: no event %d within 10s", a.id, kind)
		}
	}
}

type agentOpt func(*nodeagent.Config)

func withProber(p func(context.Context, probe.Request) (probe.Result, error)) agentOpt {
	return func(c *nodeagent.Config) { c.Prober = p }
}

// withConcurrency bounds the agent's probes in flight.
func withConcurrency(n int) agentOpt { return func(c *nodeagent.Config) { c.Concurrency = n } }

// withSpread sets the part of a batch's time its starts are spread over
// (agent.NoSpread: all at once).
func withSpread(f float64) agentOpt { return func(c *nodeagent.Config) { c.Spread = f } }

func withLabels(l map[string]string) agentOpt { return func(c *nodeagent.Config) { c.Labels = l } }

func withToken(tok string) agentOpt { return func(c *nodeagent.Config) { c.Token = tok } }

func startAgent(t *testing.T, gateway, id string, opts ...agentOpt) *testAgent {
	t.Helper()
	ta := &testAgent{id: id, done: make(chan struct{}), events: make(chan nodeagent.Event, 64)}
	cfg := nodeagent.Config{
		Gateway: gateway, ID: id, Token: testToken, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Log: hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Warn, Output: newTestOutput(t)}),
		OnEvent: func(e nodeagent.Event) {
			select {
			case ta.events <- e:
			default:
			}
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	a, err := nodeagent.New(cfg)
	if err != nil {
		t.Fatalf("agent %s: %v", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ta.cancel = cancel
	go func() {
		defer close(ta.done)
		if err := a.Run(ctx); err != nil {
			t.Errorf("agent %s: %v", id, err)
		}
	}()
	t.Cleanup(ta.kill)
	return ta
}

// awaitOnline waits until exactly the given number of nodes are online.
func awaitOnline(t *testing.T, src *Source, n int) {
	t.Helper()
	// A hang guard: a node comes online in well under a second when idle.
	timeout := time.After(time.Minute)
	for {
		changed := src.Changed()
		if len(src.reg.online()) == n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%d nodes online after a minute, want %d: %+v", len(src.reg.online()), n, src.Nodes())
		}
	}
}

// origin starts an HTTP origin answering status.
func origin(t *testing.T, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

func vote(t *testing.T, src sdk.VoteSource, ballot sdk.Ballot, deadline time.Duration) []sdk.Vote {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	votes, err := src.Vote(ctx, ballot)
	if err != nil {
		t.Fatalf("vote: %v", err)
	}
	return votes
}

// testOutput sends log lines to the test's log until the test ends; a
// server goroutine still winding down after that writes nowhere (t.Log
// after the end is a race).
type testOutput struct {
	t    *testing.T
	over *bool // guarded by logMu
}

var logMu sync.Mutex

func newTestOutput(t *testing.T) testOutput {
	o := testOutput{t: t, over: new(bool)}
	t.Cleanup(func() {
		logMu.Lock()
		defer logMu.Unlock()
		*o.over = true
	})
	return o
}

func (o testOutput) Write(p []byte) (int, error) {
	logMu.Lock()
	defer logMu.Unlock()
	if !*o.over {
		o.t.Log(string(p))
	}
	return len(p), nil
}
