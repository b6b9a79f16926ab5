package xds_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	"github.com/vigilcdn/vigil/sdk/publication"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// TestVigilNodeServesXDS: a real vigil-node process with -xds-listen
// follows a test control plane; grpc-go's xDS client, pointed at it,
// sends its calls to level 1, then to level 2 once the control plane
// publishes the failover. The node's log has no NACK.
func TestVigilNodeServesXDS(t *testing.T) {
	bin := sdktest.Build(t, "../cmd/vigil-node")
	a1, b1 := backend(t), backend(t)
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	level := func(n int) []publication.Site {
		addr := map[int]string{1: a1, 2: b1}[n]
		return []publication.Site{{Name: "img", Hostname: "img.example.org", Level: n,
			Origins: []publication.Origin{{Name: fmt.Sprintf("o%d", n), Address: "http://" + addr, State: "healthy"}}}}
	}
	cp.Publish(level(1))

	addr := testnet.Addr(t)
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "-control-plane", cp.URL(), "-state-dir", t.TempDir(), "-xds-listen", addr,
		"-xds-http-listen", "127.0.0.1:10000", "-log-level", "debug")
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})

	r := &rig{conn: xdsClient(t, addr), logs: logs}
	if counts := r.waitLands(t, set(a1), 10); !only(counts, set(a1)) {
		t.Errorf("level 1: calls landed elsewhere: %v", counts)
	}
	cp.Publish(level(2))
	if counts := r.waitLands(t, set(b1), 10); !only(counts, set(b1)) {
		t.Errorf("level 2: calls landed elsewhere: %v", counts)
	}
	if strings.Contains(logs.String(), "NACK") {
		t.Errorf("a client refused a snapshot:\n%s", logs.String())
	}
}
