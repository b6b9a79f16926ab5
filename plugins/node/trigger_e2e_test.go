package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/publication"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// withProxy makes the agent proxy visitors on loopback, following the
// publication of the control plane at cp.
func withProxy(cp, stateDir string) agentOpt {
	return func(c *nodeagent.Config) {
		c.ControlPlane, c.StateDir, c.ProxyListen, c.PollWait = cp, stateDir, "127.0.0.1:0", 5*time.Second
	}
}

// TestPassiveTriggerSuspectsTheSite: a real vigil-node proxies visitors to
// a real origin that starts failing. Without another round being asked,
// the node's passive report reaches the gateway, which reports the site
// as suspect over the plugin protocol's suspect stream (gRPC), as vigil
// reads it.
func TestPassiveTriggerSuspectsTheSite(t *testing.T) {
	var sick atomic.Bool
	a1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if sick.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "a1")
	}))
	t.Cleanup(a1.Close)
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	version := cp.Publish([]publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: a1.URL, State: "healthy"}}}})

	gw := startGateway(t, map[string]any{"passive_votes": true, "passive_min_requests": 10.0})
	suspects := sdktest.Suspects(t, sdktest.InProcess(t, gw))
	ta := startAgent(t, gw.Addr().String(), "edge-1", withProxy(cp.URL(), t.TempDir()))

	// The agent attaches, listens and serves the publication, in any order.
	var proxyAddr net.Addr
	attached, served := false, false
	hang := time.After(time.Minute) // catches a hang only
	for !attached || !served || proxyAddr == nil {
		select {
		case e := <-ta.events:
			switch {
			case e.Kind == nodeagent.EventAttached:
				attached = true
			case e.Kind == nodeagent.EventListening:
				proxyAddr = e.Addr
			case e.Kind == nodeagent.EventPublication && e.Version == version:
				served = true
			}
		case <-hang:
			t.Fatalf("agent: attached %v, listening %v, publication served %v", attached, proxyAddr != nil, served)
		}
	}
	awaitOnline(t, gw, 1)

	// One round: the node learns which origin the gateway asks about.
	ballot := sdk.Ballot{Round: 1, Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: a1.URL, Host: "www.example.com",
		Path: "/", Timeout: 5 * time.Second}}}
	votes := vote(t, gw, ballot, 30*time.Second)
	if len(votes) == 0 {
		t.Fatal("no votes in the first round")
	}
	rounds := gw.round.Load()

	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	get := func() int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+proxyAddr.String()+"/page", nil)
		req.Host = "www.example.com"
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("visitor GET: %v", err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	for i := range 10 {
		if code := get(); code != http.StatusOK {
			t.Fatalf("healthy visitor GET %d: status %d", i, code)
		}
	}
	select {
	case s := <-suspects:
		t.Fatalf("suspect %+v while the real traffic is healthy", s)
	default:
	}
	// The origin breaks: the next ten visitors get errors, and the node's
	// window holds 10 failures in 20 requests (more than 0.3 of them).
	sick.Store(true)
	for i := range 10 {
		if code := get(); code < 500 {
			t.Fatalf("visitor GET %d of a failing origin: status %d", i, code)
		}
	}
	select {
	case s, ok := <-suspects:
		if !ok {
			t.Fatal("the suspect stream ended")
		}
		if s.Site != "www" || s.Origin != "a1" {
			t.Fatalf("suspect %+v, want www/a1", s)
		}
		t.Logf("suspect: %+v", s)
	case <-time.After(time.Minute): // catches a hang only
		t.Fatal("no suspect after the real traffic failed")
	}
	if n := gw.round.Load(); n != rounds {
		t.Fatalf("%d rounds asked; the suspect must come without one", n-rounds)
	}
}

// BenchmarkPassiveTriggerLatency: how long after the visitor request that
// trips a node's passive window (the 7th failure of 17, over
// passive_failure_ratio 0.3) the gateway's suspect is on vigil's stream,
// with no round in between; in-process gateway and vigil-node over real
// gRPC, a real proxy and origins on loopback. Each iteration uses an
// origin and site of its own (suspects are once per suspect_interval).
// Run it with -benchtime=Nx.
func BenchmarkPassiveTriggerLatency(b *testing.B) {
	log := hclog.NewNullLogger()
	gw := New(log)
	gw.getenv = func(string) string { return testToken }
	if err := gw.Configure(context.Background(), sdk.Config{Values: map[string]any{"listen": "127.0.0.1:0", "token_env": "T", "passive_votes": true}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(gw.Close)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	suspects := gw.Suspects(ctx)
	cp := fakecp.New()
	b.Cleanup(cp.Close)
	events := make(chan nodeagent.Event, 256)
	a, err := nodeagent.New(nodeagent.Config{Gateway: gw.Addr().String(), ID: "edge-1", Token: testToken, ControlPlane: cp.URL(), StateDir: b.TempDir(),
		ProxyListen: "127.0.0.1:0", PollWait: 5 * time.Second, Log: log, OnEvent: func(e nodeagent.Event) {
			select {
			case events <- e:
			default:
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	await := func(ok func(nodeagent.Event) bool) {
		hang := time.After(time.Minute)
		for {
			select {
			case e := <-events:
				if ok(e) {
					return
				}
			case <-hang:
				b.Fatal("agent: no such event within a minute")
			}
		}
	}
	await(func(e nodeagent.Event) bool { return e.Kind == nodeagent.EventAttached })
	client := &http.Client{Timeout: 10 * time.Second}
	b.Cleanup(client.CloseIdleConnections)
	var sites []publication.Site
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var sick atomic.Bool
		o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if sick.Load() {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}))
		host := fmt.Sprintf("s%d.example.com", i)
		sites = append(sites, publication.Site{Name: fmt.Sprintf("s%d", i), Hostname: host, Level: 1,
			Origins: []publication.Origin{{Name: "o", Address: o.URL, State: "healthy"}}})
		v := cp.Publish(sites)
		await(func(e nodeagent.Event) bool { return e.Kind == nodeagent.EventPublication && e.Version == v })
		vctx, vcancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := gw.Vote(vctx, sdk.Ballot{Round: uint64(i + 1), Targets: []sdk.Target{{Site: sites[i].Name, Origin: "o", Address: o.URL, Host: host, Path: "/", Timeout: 5 * time.Second}}})
		vcancel()
		if err != nil {
			b.Fatal(err)
		}
		get := func() {
			req, _ := http.NewRequest(http.MethodGet, "http://"+a.ProxyAddr().String()+"/", nil)
			req.Host = host
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		for range 10 {
			get()
		}
		sick.Store(true)
		for range 6 {
			get()
		}
		b.StartTimer()
		start := time.Now()
		get() // the 7th failure of 17: the window trips
		select {
		case s := <-suspects:
			total += time.Since(start)
			if s.Site != sites[i].Name {
				b.Fatalf("suspect %+v, want site %s", s, sites[i].Name)
			}
		case <-time.After(time.Minute):
			b.Fatal("no suspect")
		}
		b.StopTimer()
		o.Close()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/suspect")
}
