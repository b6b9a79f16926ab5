package etcdtest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Cluster is a multi-member etcd on loopback, each member at etcd's
// defaults (no tuning flag): what a measurement of a real deployment runs
// against.
type Cluster struct {
	Members []*Server
}

// StartCluster runs an etcd cluster of n members on free loopback ports,
// each with its own temporary data dir; they are killed at the end of the
// test.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Require(t)
	type ports struct{ client, peer int }
	ps := make([]ports, n)
	var initial []string
	for i := range ps {
		ps[i] = ports{freePort(t), freePort(t)}
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ps[i].peer))
	}
	c := &Cluster{}
	for i, p := range ps {
		s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", p.client)}
		peer := fmt.Sprintf("http://127.0.0.1:%d", p.peer)
		s.cmd = exec.Command(bin,
			"--name", fmt.Sprintf("m%d", i), "--data-dir", t.TempDir(),
			"--listen-client-urls", s.Endpoint, "--advertise-client-urls", s.Endpoint,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "vigil-test-cluster", "--log-level", "error", "--logger", "zap")
		s.cmd.Stdout = &lockedWriter{s: s}
		s.cmd.Stderr = &lockedWriter{s: s}
		if err := s.cmd.Start(); err != nil {
			t.Fatalf("starting etcd member %d: %v", i, err)
		}
		t.Cleanup(s.Kill)
		c.Members = append(c.Members, s)
	}
	cli := c.Client(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "/health") // linearizable: needs a quorum
		cancel()
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd cluster of %d did not become ready in 30s: %v\n%s", n, err, c.Members[0].Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, s := range c.Members {
		out = append(out, s.Endpoint)
	}
	return out
}

// Client returns a client of every member, closed at the end of the test.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
