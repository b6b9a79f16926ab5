package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

func healthTarget(origin, address string, timeout time.Duration) sdk.Target {
	return sdk.Target{Site: "www", Origin: origin, Address: address, Host: "www.example.com", Path: "/health", Timeout: timeout}
}

// TestBlackHolesThroughNode: 300 black-holed origins, probed by a real node
// through a real gateway (driven over the plugin protocol, as vigil drives
// it), all get a down: timeout vote in one batch. With 64 probes in flight
// they took five timeouts, more than the round had. The batch's deadline
// here is far above its need, so that a loaded machine still gives every
// verdict; how long it took is logged, not asserted (the direct plugin's
// BenchmarkBlackHoles measures a round of black holes).
func TestBlackHolesThroughNode(t *testing.T) {
	const targets = 300
	gw := startGateway(t, nil)
	startAgent(t, gw.Addr().String(), "edge-1")
	awaitOnline(t, gw, 1)
	src := sdktest.InProcess(t, gw)
	addr := sdktest.BlackHole(t)
	ballot := sdk.Ballot{Round: 1}
	for i := range targets {
		ballot.Targets = append(ballot.Targets, healthTarget(fmt.Sprint("o", i), addr, 500*time.Millisecond))
	}
	start := time.Now()
	votes := vote(t, src, ballot, 30*time.Second)
	took := time.Since(start)
	sdktest.CheckVotes(t, ballot, votes)
	if len(votes) != targets {
		t.Fatalf("%d votes for %d targets", len(votes), targets)
	}
	for _, v := range votes {
		if v.Value != sdk.Down || v.Reason != sdk.ReasonTimeout || v.Voter != "edge-1" {
			t.Fatalf("vote %+v, want down: timeout by edge-1", v)
		}
	}
	t.Logf("%d black-holed targets: %d down votes in %v (probe timeout 500ms)", targets, len(votes), took.Round(time.Millisecond))
}

// TestInterruptedProbeIsNotADown: a probe whose timeout does not fit the
// batch's time is cut by the batch's deadline: the node reports it not
// run, and the vote is an abstention out of time, never a down: timeout.
func TestInterruptedProbeIsNotADown(t *testing.T) {
	gw := startGateway(t, nil)
	startAgent(t, gw.Addr().String(), "edge-1")
	awaitOnline(t, gw, 1)
	ballot := sdk.Ballot{Round: 1, Targets: []sdk.Target{healthTarget("a1", sdktest.BlackHole(t), 5*time.Second)}}
	votes := vote(t, gw, ballot, time.Second)
	if len(votes) != 1 {
		t.Fatalf("votes %+v, want one", votes)
	}
	if v := votes[0]; v.Value != sdk.Abstain || v.Reason != sdk.ReasonOutOfTime || v.Voter != "edge-1" || !strings.Contains(v.Detail, "interrupted") {
		t.Errorf("vote %+v, want an abstention out of time by edge-1 (its probe interrupted)", v)
	}
}

// TestCutJobsRotate: a batch too big for its budget (one probe in flight,
// each taking 300ms, ten of them in a 3s call) gets abstentions out of
// time for what was cut, with the node as voter, never a down; the jobs cut
// differ from round to round (the node starts the ones it cut last time
// first), so every origin gets probed.
func TestCutJobsRotate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // every probe takes a while
	}))
	t.Cleanup(srv.Close)
	gw := startGateway(t, nil)
	startAgent(t, gw.Addr().String(), "edge-1", withConcurrency(1), withSpread(nodeagent.NoSpread))
	awaitOnline(t, gw, 1)
	src := sdktest.InProcess(t, gw)
	ballot := sdk.Ballot{}
	for i := range 10 {
		tg := healthTarget(fmt.Sprint("o", i), srv.URL, 900*time.Millisecond)
		tg.Path = fmt.Sprintf("/health?o=%d", i)
		ballot.Targets = append(ballot.Targets, tg)
	}
	probed := map[string]int{}
	var cuts [][]string
	for round := range 4 {
		ballot.Round = uint64(round + 1)
		// 3s, not 1s: the gateway answers a tenth before the deadline, and
		// 100 ms of margin was within a loaded machine's delays.
		votes := vote(t, src, ballot, 3*time.Second)
		sdktest.CheckVotes(t, ballot, votes)
		if len(votes) != len(ballot.Targets) {
			t.Fatalf("round %d: %d votes for %d targets: %+v", round, len(votes), len(ballot.Targets), votes)
		}
		var cut []string
		for _, v := range votes {
			switch {
			case v.Voter != "edge-1":
				t.Fatalf("round %d: vote %+v, want edge-1 as voter", round, v)
			case v.Value == sdk.Up:
				probed[v.Origin]++
			case v.Value == sdk.Abstain && v.Reason == sdk.ReasonOutOfTime:
				cut = append(cut, v.Origin)
			default:
				t.Fatalf("round %d: vote %+v, want up or an abstention out of time", round, v)
			}
		}
		slices.Sort(cut)
		if len(cut) == 0 || len(cut) == len(ballot.Targets) {
			t.Fatalf("round %d cut %d of %d; the test needs a round that fits some but not all", round, len(cut), len(ballot.Targets))
		}
		if round > 0 {
			prev := cuts[round-1]
			again := slices.DeleteFunc(slices.Clone(cut), func(o string) bool { return !slices.Contains(prev, o) })
			// The ones cut last time start first: none is cut again while
			// the round has room for all of them.
			if len(again) > 0 && len(prev) <= len(ballot.Targets)-len(cut) {
				t.Errorf("round %d cut %v again (cut: %v, the round before: %v)", round, again, cut, prev)
			}
		}
		cuts = append(cuts, cut)
	}
	if len(probed) != len(ballot.Targets) {
		t.Errorf("after %d rounds only %d of %d origins were ever probed: %v (cut: %v)", len(cuts), len(probed), len(ballot.Targets), probed, cuts)
	}
	t.Logf("cut per round: %v", cuts)
}

// TestStartsAreSpread: the probes of a batch do not all start at once, and
// their order changes from batch to batch.
func TestStartsAreSpread(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	var order []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		order = append(order, r.URL.Query().Get("o"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	gw := startGateway(t, nil)
	// spread 0.05 of the node's share of a 20s round spreads the starts
	// over about 0.8s; probe k waits at least k/40 of it, and a timer
	// never fires early. So the i-th earliest arrival is at least i/40
	// of the spread after the call: the test asserts that lower bound
	// (at 0.5s, room for a batch delivered late), which a loaded machine
	// can only help, and no upper bound.
	startAgent(t, gw.Addr().String(), "edge-1", withSpread(0.05))
	awaitOnline(t, gw, 1)
	const targets = 40
	ballot := sdk.Ballot{}
	for i := range targets {
		// 1s: the origin answers at once, but a connect on a loaded
		// machine took more than 200 ms.
		tg := healthTarget(fmt.Sprint("o", i), srv.URL, time.Second)
		tg.Path = fmt.Sprintf("/health?o=%d", i)
		ballot.Targets = append(ballot.Targets, tg)
	}
	var orders [][]string
	for round := range 2 {
		mu.Lock()
		arrivals, order = nil, nil
		mu.Unlock()
		ballot.Round = uint64(round + 1)
		before := time.Now()
		votes := vote(t, gw, ballot, 20*time.Second)
		for _, v := range votes {
			if v.Value != sdk.Up {
				t.Fatalf("round %d: vote %+v", round, v)
			}
		}
		mu.Lock()
		if len(arrivals) != len(ballot.Targets) {
			t.Fatalf("round %d: %d probes arrived, want %d", round, len(arrivals), len(ballot.Targets))
		}
		sorted := slices.SortedFunc(slices.Values(arrivals), time.Time.Compare)
		orders = append(orders, order)
		mu.Unlock()
		const minSpread = 500 * time.Millisecond
		for i, a := range sorted {
			if at, least := a.Sub(before), minSpread*time.Duration(i)/targets; at < least {
				t.Errorf("round %d: start %d of %d came %v after the call, want at least %v: the starts are not spread", round, i+1, targets, at, least)
				break
			}
		}
	}
	if slices.Equal(orders[0], orders[1]) {
		t.Errorf("two batches started their probes in the same order: %v", orders[0])
	}
}

// privateOrigin is an https origin whose certificate, for origin.internal
// only, a private CA signed. It answers /start with a redirect to /health;
// /health is healthy only when the probe sent X-Probe-Token, the site's
// Host, and origin.internal as TLS server name; /big is a long body with
// MARK at its end.
func privateOrigin(t *testing.T) (address string, caPEM []byte) {
	t.Helper()
	ca := newTestCA(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "origin.internal"}, DNSNames: []string{"origin.internal"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/start":
			http.Redirect(w, r, "/health", http.StatusFound)
		case "/health":
			if r.Header.Get("X-Probe-Token") != "s3cret" || r.Host != "www.example.com" || r.TLS.ServerName != "origin.internal" {
				http.Error(w, "who are you", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("healthy"))
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat("a", 64<<10) + "MARK"))
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, ca.pem
}

// TestTargetSettingsReachProbe: a target's header, TLS server name, CA
// bundle (from the ballot), insecure skip verify, redirects and body cap
// reach the node's probe of a real https origin.
func TestTargetSettingsReachProbe(t *testing.T) {
	addr, caPEM := privateOrigin(t)
	gw := startGateway(t, nil)
	startAgent(t, gw.Addr().String(), "edge-1")
	awaitOnline(t, gw, 1)
	private := sdk.TLSSettings{ServerName: "origin.internal", CA: "private"}
	token := map[string]string{"X-Probe-Token": "s3cret"}
	tg := func(origin, path string, tls sdk.TLSSettings, headers map[string]string) sdk.Target {
		// Timeouts far above need: every verdict here is about a setting,
		// none about time, and TLS handshakes are slow on a loaded machine.
		t := healthTarget(origin, addr, 10*time.Second)
		t.Path, t.TLS, t.Headers = path, tls, headers
		return t
	}
	all := tg("all", "/start", private, token)
	all.FollowRedirects = true
	all.Expect.BodyContains = "healthy" // the redirect's own body lacks it
	noFollow := tg("no-follow", "/start", private, token)
	noFollow.Expect.BodyContains = "healthy"
	insecure := tg("insecure", "/health", sdk.TLSSettings{ServerName: "origin.internal", InsecureSkipVerify: true}, token)
	capped := tg("capped", "/big", private, nil)
	capped.MaxBody, capped.Expect.BodyContains = 1024, "MARK"
	uncapped := tg("uncapped", "/big", private, nil)
	uncapped.Expect.BodyContains = "MARK"
	ballot := sdk.Ballot{Round: 1, CAs: map[string][]byte{"private": caPEM}, Targets: []sdk.Target{
		all, noFollow, insecure, capped, uncapped,
		tg("no-ca", "/health", sdk.TLSSettings{ServerName: "origin.internal"}, token),
		tg("no-header", "/health", private, nil),
		tg("no-server-name", "/health", sdk.TLSSettings{CA: "private"}, token),
	}}
	want := map[string]struct {
		value  sdk.Value
		reason sdk.Reason
	}{
		"all":            {sdk.Up, sdk.ReasonOK},
		"no-follow":      {sdk.Down, sdk.ReasonBodyMismatch},
		"insecure":       {sdk.Up, sdk.ReasonOK},
		"capped":         {sdk.Down, sdk.ReasonBodyMismatch},
		"uncapped":       {sdk.Up, sdk.ReasonOK},
		"no-ca":          {sdk.Down, sdk.ReasonTLSFailed},
		"no-header":      {sdk.Down, sdk.ReasonHTTP5xx},
		"no-server-name": {sdk.Down, sdk.ReasonTLSFailed},
	}
	votes := vote(t, sdktest.InProcess(t, gw), ballot, 30*time.Second)
	sdktest.CheckVotes(t, ballot, votes)
	if len(votes) != len(want) {
		t.Fatalf("%d votes, want %d: %+v", len(votes), len(want), votes)
	}
	for _, v := range votes {
		if w := want[v.Origin]; v.Value != w.value || v.Reason != w.reason || v.Voter != "edge-1" {
			t.Errorf("%s: %v %v by %s (%s), want %v %v", v.Origin, v.Value, v.Reason, v.Voter, v.Detail, w.value, w.reason)
		}
	}
}

// TestBatchProtocol: what a batch carries and how the gateway reads the
// answers, with raw protocol nodes. A node announcing probe_settings gets
// the target settings and only the CA bundles its jobs name; its job
// reported not run, and one left out of its answer, are abstentions out of
// time, never downs. A node of the first release (no features) still gets
// the plain targets, and abstains as unsupported on the targets whose
// settings it would ignore.
func TestBatchProtocol(t *testing.T) {
	gw := startGateway(t, nil)
	fresh := attachRaw(t, gw.Addr().String(), "fresh", nil, featureProbeSettings, featureNotRun)
	old := attachRaw(t, gw.Addr().String(), "old", nil)
	awaitOnline(t, gw, 2)
	if !slices.Contains(fresh.welcome.GetFeatures(), featureNotRun) {
		t.Errorf("welcome %+v does not announce %q", fresh.welcome, featureNotRun)
	}
	plain := healthTarget("plain", "http://192.0.2.1", time.Second)
	tuned := healthTarget("tuned", "https://192.0.2.2", time.Second)
	tuned.TLS = sdk.TLSSettings{ServerName: "origin.internal", CA: "private", InsecureSkipVerify: true}
	tuned.Headers, tuned.FollowRedirects, tuned.MaxBody = map[string]string{"X-Probe-Token": "s3cret"}, true, 4096
	skipped := healthTarget("skipped", "http://192.0.2.3", time.Second)
	ballot := sdk.Ballot{Round: 1, CAs: map[string][]byte{"private": []byte("PRIVATE PEM"), "unused": []byte("UNUSED PEM")},
		Targets: []sdk.Target{plain, tuned, skipped}}

	type result struct {
		votes []sdk.Vote
	}
	got := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		votes, err := gw.Vote(ctx, ballot)
		if err != nil {
			t.Errorf("vote: %v", err)
		}
		got <- result{votes}
	}()
	timeout := time.After(time.Minute)
	var fb, ob *pb.Batch
	for fb == nil || ob == nil {
		select {
		case fb = <-fresh.batches:
		case ob = <-old.batches:
		case <-timeout:
			t.Fatal("no batch within a minute (a hang)")
		}
	}
	// The fresh node: every job, the settings, only the bundle named.
	if len(fb.GetJobs()) != 3 {
		t.Fatalf("fresh node's batch has %d jobs, want 3", len(fb.GetJobs()))
	}
	if keys := slices.Sorted(maps.Keys(fb.GetCas())); !slices.Equal(keys, []string{"private"}) || string(fb.GetCas()["private"]) != "PRIVATE PEM" {
		t.Errorf("fresh node's batch carries CA bundles %v, want only private", keys)
	}
	byAddr := map[string]*pb.ProbeJob{}
	for _, j := range fb.GetJobs() {
		byAddr[j.GetAddress()] = j
	}
	j := byAddr["https://192.0.2.2"]
	if j.GetTlsServerName() != "origin.internal" || j.GetCa() != "private" || !j.GetInsecureSkipVerify() || j.GetHeaders()["X-Probe-Token"] != "s3cret" ||
		!j.GetFollowRedirects() || j.GetMaxBody() != 4096 || fb.GetBudgetMs() <= 0 {
		t.Errorf("tuned job %+v (budget %dms)", j, fb.GetBudgetMs())
	}
	// The old node: the plain jobs only, no bundles.
	if len(ob.GetJobs()) != 2 || len(ob.GetCas()) != 0 {
		t.Errorf("old node's batch %+v, want the two plain jobs and no CA bundles", ob)
	}
	for _, j := range ob.GetJobs() {
		if j.GetAddress() == "https://192.0.2.2" {
			t.Errorf("the old node got the tuned job")
		}
	}

	index := func(b *pb.Batch, addr string) uint32 {
		for i, j := range b.GetJobs() {
			if j.GetAddress() == addr {
				return uint32(i)
			}
		}
		t.Fatalf("no job for %s", addr)
		return 0
	}
	// fresh: plain up, tuned not run, skipped left out.
	send := func(n *rawNode, res *pb.BatchResult) {
		if err := n.stream.Send(&pb.NodeMessage{Msg: &pb.NodeMessage_Result{Result: res}}); err != nil {
			t.Fatal(err)
		}
	}
	send(fresh, &pb.BatchResult{BatchId: fb.GetBatchId(), Results: []*pb.ProbeResult{
		{Job: index(fb, "http://192.0.2.1"), Up: true, Reason: "ok"},
		{Job: index(fb, "https://192.0.2.2"), NotRun: true, Reason: "out_of_time", Detail: "the batch's time ran out before its turn"},
	}})
	// old: both plain jobs down, as a first-release node answers.
	send(old, &pb.BatchResult{BatchId: ob.GetBatchId(), Results: []*pb.ProbeResult{
		{Job: 0, Reason: "connect_failed", Detail: "refused"}, {Job: 1, Reason: "connect_failed", Detail: "refused"},
	}})
	var votes []sdk.Vote
	select {
	case r := <-got:
		votes = r.votes
	case <-time.After(time.Minute):
		t.Fatal("Vote did not return after the answers (a hang)")
	}
	sdktest.CheckVotes(t, ballot, votes)
	type key struct{ voter, origin string }
	byKey := map[key]sdk.Vote{}
	for _, v := range votes {
		byKey[key{v.Voter, v.Origin}] = v
	}
	want := map[key]struct {
		value  sdk.Value
		reason sdk.Reason
	}{
		{"fresh", "plain"}:   {sdk.Up, sdk.ReasonOK},
		{"fresh", "tuned"}:   {sdk.Abstain, sdk.ReasonOutOfTime},
		{"fresh", "skipped"}: {sdk.Abstain, sdk.ReasonOutOfTime},
		{"old", "plain"}:     {sdk.Down, sdk.ReasonConnectFailed},
		{"old", "tuned"}:     {sdk.Abstain, sdk.ReasonUnsupported},
		{"old", "skipped"}:   {sdk.Down, sdk.ReasonConnectFailed},
	}
	if len(votes) != len(want) {
		t.Errorf("%d votes, want %d: %+v", len(votes), len(want), votes)
	}
	for k, w := range want {
		if v, ok := byKey[k]; !ok || v.Value != w.value || v.Reason != w.reason {
			t.Errorf("%s's vote for %s: %+v, want %v %v", k.voter, k.origin, v, w.value, w.reason)
		}
	}
	if d := byKey[key{"old", "tuned"}].Detail; !strings.Contains(d, "upgrade") {
		t.Errorf("the old node's abstention says %q; want it to say to upgrade the node", d)
	}
}
