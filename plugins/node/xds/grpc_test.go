package xds_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	grpcxds "google.golang.org/grpc/xds"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	"github.com/vigilcdn/vigil/plugins/node/xds"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// hangGuard bounds every wait: it only catches a hang, the tests must
// pass on a loaded machine.
const hangGuard = 2 * time.Minute

// backend is a real gRPC server on loopback serving the health service:
// the origin a call lands on is told by the peer address.
func backend(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// syncBuffer is a log output read while written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// rig is a vigil-node edge hub driving an xDS Server, a fake control
// plane for the topology, and a gRPC client that resolves xds:///img
// through the Server with grpc-go's own xDS client.
type rig struct {
	srv  *xds.Server
	hub  *edge.Hub
	cp   *fakecp.Server
	conn *grpc.ClientConn
	logs *syncBuffer
}

func newRig(t *testing.T) *rig {
	t.Helper()
	logs := &syncBuffer{}
	log := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})
	srv, err := xds.New(xds.Options{Listen: "127.0.0.1:0", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	hub, err := edge.NewHub(edge.HubOptions{Drivers: []edge.Driver{srv}, ControlPlane: cp.URL(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hub.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	conn := xdsClient(t, srv.Addr().String())
	return &rig{srv: srv, hub: hub, cp: cp, conn: conn, logs: logs}
}

// xdsClient is a gRPC channel to xds:///img, resolved by grpc-go's own
// xDS client through the xDS service at addr.
func xdsClient(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	// The bootstrap an operator's gRPC client would read from
	// GRPC_XDS_BOOTSTRAP, written to a file and handed over as the
	// grpc version in go.mod allows for a test.
	boot, err := json.Marshal(map[string]any{
		"xds_servers": []any{map[string]any{
			"server_uri":      addr,
			"channel_creds":   []any{map[string]any{"type": "insecure"}},
			"server_features": []string{"xds_v3"},
		}},
		"node": map[string]any{"id": "grpc-test-client", "locality": map[string]any{"region": "test"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bootstrap.json")
	if err := os.WriteFile(path, boot, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	builder, err := grpcxds.NewXDSResolverWithConfigForTesting(b)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///img", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(builder))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// origin is one origin of the test site, as the topology lists it.
type origin struct {
	name, addr, state string
	level             int
}

// publish makes the control plane's topology list origins, and hands
// the hub the publication of site img at level with ramp (nil: none).
func (r *rig) publish(t *testing.T, version uint64, level int, origins []origin, ramp *publication.Ramp) {
	t.Helper()
	byName := map[string]any{}
	var current []publication.Origin
	for _, o := range origins {
		byName[o.name] = map[string]any{"level": o.level, "address": "http://" + o.addr, "state": o.state}
		if o.level == level {
			current = append(current, publication.Origin{Name: o.name, Address: "http://" + o.addr, State: o.state})
		}
	}
	if err := r.cp.SetSites([]any{map[string]any{"site": "img", "origins": byName}}); err != nil {
		t.Fatal(err)
	}
	format := 0
	if ramp != nil {
		format = publication.FormatRamp
	}
	r.hub.SetSnapshot(&publication.Snapshot{Version: version, Format: format, Sites: []publication.Site{
		{Name: "img", Hostname: "img.example.org", Level: level, Origins: current, Ramp: ramp}}})
}

// call makes one RPC through the xDS-resolved channel and returns the
// address of the backend that answered.
func (r *rig) call(t *testing.T) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var p peer.Peer
	_, err := healthpb.NewHealthClient(r.conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true))
	if err != nil {
		return "", err
	}
	return p.Addr.String(), nil
}

// waitLands calls until one call lands on a backend of want (the new
// snapshot reached the client), then makes n calls and returns how many
// landed on each backend.
func (r *rig) waitLands(t *testing.T, want map[string]bool, n int) map[string]int {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	var last string
	for {
		got, err := r.call(t)
		if err == nil && want[got] {
			break
		}
		last = fmt.Sprintf("%s %v", got, err)
		if time.Now().After(deadline) {
			t.Fatalf("no call landed on %v (last: %s); server log:\n%s", want, last, r.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	counts := map[string]int{}
	for range n {
		got, err := r.call(t)
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		counts[got]++
	}
	return counts
}

func set(addrs ...string) map[string]bool {
	m := map[string]bool{}
	for _, a := range addrs {
		m[a] = true
	}
	return m
}

// TestGRPCClientFollowsLevels: grpc-go's own xDS client, resolving
// xds:///img through the Server, sends its calls to level 1's backends,
// to level 2's once a publication fails the site over, to both during a
// failback ramp, and to level 1's alone once the ramp ends; an origin
// vigil judges unhealthy gets no call. The client never refuses a
// snapshot (no NACK).
func TestGRPCClientFollowsLevels(t *testing.T) {
	r := newRig(t)
	a1, a2, b1, b2 := backend(t), backend(t), backend(t), backend(t)
	levelOne := func(state string) []origin {
		return []origin{{"a1", a1, state, 1}, {"a2", a2, state, 1}, {"b1", b1, "healthy", 2}, {"b2", b2, "healthy", 2}}
	}

	const n = 40
	// first is a backend that only this step's snapshot sends calls to,
	// when there is one: the wait for a call on it is the wait for the
	// snapshot. Otherwise (settle) the step waits until a whole batch of
	// calls lands where it should.
	steps := []struct {
		name   string
		apply  func()
		first  map[string]bool
		settle bool
		want   map[string]bool // every call lands here
		spread map[string]bool // each of these gets calls
	}{
		{"level 1", func() { r.publish(t, 1, 1, levelOne("healthy"), nil) }, set(a1, a2), false, set(a1, a2), set(a1, a2)},
		{"an unhealthy origin gets none", func() {
			os := levelOne("healthy")
			os[1].state = "unhealthy"
			r.publish(t, 2, 1, os, nil)
		}, set(a1), true, set(a1), set(a1)},
		{"failover to level 2", func() { r.publish(t, 3, 2, levelOne("unhealthy"), nil) }, set(b1, b2), false, set(b1, b2), set(b1, b2)},
		{"ramp back to level 1", func() {
			r.publish(t, 4, 1, levelOne("healthy"), &publication.Ramp{Weight: 30, From: 2, FromOrigins: []publication.Origin{
				{Name: "b1", Address: "http://" + b1, State: "healthy"}, {Name: "b2", Address: "http://" + b2, State: "healthy"}}})
		}, set(a1, a2), false, set(a1, a2, b1, b2), set(a1, b1)},
		{"ramp ended", func() { r.publish(t, 5, 1, levelOne("healthy"), nil) }, set(a1, a2), true, set(a1, a2), set(a1, a2)},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.apply()
			counts := r.waitLands(t, step.first, n)
			deadline := time.Now().Add(hangGuard)
			for step.settle && !only(counts, step.want) {
				if time.Now().After(deadline) {
					t.Fatalf("calls still land outside %v: %v", step.want, counts)
				}
				counts = r.waitLands(t, step.want, n)
			}
			t.Logf("version %s: %v", r.srv.Version(), counts)
			if !only(counts, step.want) {
				t.Errorf("calls landed outside %v: %v", step.want, counts)
			}
			for a := range step.spread {
				if counts[a] == 0 {
					t.Errorf("no call of %d landed on %s: %v", n, a, counts)
				}
			}
		})
	}
	if strings.Contains(r.logs.String(), "NACK") {
		t.Errorf("the gRPC client refused a snapshot:\n%s", r.logs.String())
	}
}

// only tells whether every call counted landed in want.
func only(counts map[string]int, want map[string]bool) bool {
	for a := range counts {
		if !want[a] {
			return false
		}
	}
	return true
}

// TestNACKIsLogged: gRPC's client refuses a cluster with https origins
// (transport_socket_matches, see the README's limits); the Server logs the
// refusal with the client's node id and the resource type.
func TestNACKIsLogged(t *testing.T) {
	r := newRig(t)
	a := backend(t)
	r.hub.SetSnapshot(&publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "img", Hostname: "img.example.org", Level: 1,
		Origins: []publication.Origin{{Name: "a", Address: "https://" + a, State: "healthy"}}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The call fails (the cluster is refused); it only makes the client
	// ask for the resources.
	go func() { _, _ = healthpb.NewHealthClient(r.conn).Check(ctx, &healthpb.HealthCheckRequest{}) }()
	deadline := time.Now().Add(hangGuard)
	for {
		logs := r.logs.String()
		if strings.Contains(logs, "refused the resources (NACK)") {
			if !strings.Contains(logs, "node=grpc-test-client") || !strings.Contains(logs, "envoy.config.cluster.v3.Cluster") {
				t.Errorf("the NACK's line lacks the node or the type:\n%s", logs)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no NACK logged:\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
