package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
)

// TestEndToEndPathPartition runs the node gateway with two real vigil-node
// agents carrying different pop labels, the direct source after them, and
// an origin that only one node cannot reach: the origin closes, without an
// answer, every connection that the eu node's process owns (found through
// /proc, as a firewall on that node's path would). The eu group votes down
// alone for 3 rounds: a path partition is suspected, shown and announced,
// and nothing switches; unblocked, the suspicion ends. The node source's
// timeout and online_timeout are far above the round: a loaded machine
// must not lose a node's votes, which would be another story than a path
// partition. So is the direct source's timeout: its share of a 500ms
// round (112ms) fitted its probe's timeout to it, and on a loaded machine
// direct then voted a1 down where it had to settle it up.
func TestEndToEndPathPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("needs /proc/net/tcp to tell the nodes' connections apart")
	}
	var blocked atomic.Int64 // the pid whose connections are refused; 0 none
	var refusals atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pid := int(blocked.Load()); pid != 0 && socketOwnedBy(r.RemoteAddr, pid) {
			refusals.Add(1)
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(origin.Close)
	backup := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(backup.Close)

	dir := t.TempDir()
	gateway := testnet.Addr(t)
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = "500ms"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
  partition {
    label  = "pop"
    rounds = 3
  }
}
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2
  timeout   = "10s"
  env       = ["VIGIL_NODE_TOKEN"]
  config {
    listen         = %q
    token_env      = "VIGIL_NODE_TOKEN"
    online_timeout = "30s"
  }
}
source "direct" {
  plugin  = "vigil-source-direct"
  timeout = "5s"
}
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), binDir, gateway, origin.URL, backup.URL)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIGIL_NODE_TOKEN", "node-secret")
	agent := startAgentProc(t, config)
	pids := map[string]int{}
	for id, pop := range map[string]string{"edge-eu": "eu", "edge-us": "us"} {
		cmd := exec.Command(filepath.Join(binDir, "vigil-node"), "-id", id, "-labels", "pop="+pop, "-gateway", gateway, "-token-env", "VIGIL_NODE_TOKEN")
		cmd.Env = append(os.Environ(), "VIGIL_NODE_TOKEN=node-secret")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pids[id] = cmd.Process.Pid
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}

	a1 := func() map[string]any { return agent.site(t, "www")["origins"].(map[string]any)["a1"].(map[string]any) }
	nodeVotes := func(o map[string]any) (up, down int) {
		for _, raw := range o["votes"].([]any) {
			v := raw.(map[string]any)
			if v["source"] != "node" {
				continue
			}
			switch v["value"] {
			case "up":
				up++
			case "down":
				down++
			}
		}
		return
	}
	waitFor(t, "both nodes voting a1 up", 30*time.Second, func() bool {
		up, _ := nodeVotes(a1())
		return up == 2
	})
	blocked.Store(int64(pids["edge-eu"]))
	start := time.Now()

	var ev map[string]any
	waitFor(t, "path_partition_suspected", 30*time.Second, func() bool {
		for _, e := range agent.events(t) {
			body := e["event"].(map[string]any)
			if body["kind"] == "path_partition_suspected" && body["suspected"] == true {
				ev = body
				return true
			}
		}
		return false
	})
	t.Logf("suspected %s after the block (%d connections refused)", time.Since(start).Round(time.Millisecond), refusals.Load())
	if ev["group"] != "node/pop=eu" || ev["origin"] != "a1" || ev["rounds"] != float64(3) {
		t.Fatalf("event %v; want a1, group node/pop=eu, 3 rounds", ev)
	}
	// The view is of the last round: on a loaded machine a node's vote or
	// the direct source's may miss a round's deadline, and a round without
	// edge-eu's vote ends the suspicion (the group is not alone in it) until
	// 3 rounds in a row make it again. So wait for a round with both node
	// votes, a source that settled, and the suspicion in force; a view
	// that never lists it fails at the deadline.
	var site, o map[string]any
	waitFor(t, "a round with both node votes and a verdict during the suspicion", 2*time.Minute, func() bool {
		site = agent.site(t, "www")
		o = site["origins"].(map[string]any)["a1"].(map[string]any)
		up, down := nodeVotes(o)
		parts, _ := o["partitions"].([]any)
		return up+down == 2 && o["by"] != nil && len(parts) > 0
	})
	up, down := nodeVotes(o)
	if up != 1 || down != 1 || o["verdict"] != "up" || o["by"] != "direct" {
		t.Fatalf("a1: node votes %d up %d down, verdict %v by %v; want a 1-1 split settled up by direct", up, down, o["verdict"], o["by"])
	}
	parts, _ := o["partitions"].([]any)
	if len(parts) != 1 || parts[0].(map[string]any)["group"] != "node/pop=eu" {
		t.Fatalf("a1's partitions in the view: %v", o["partitions"])
	}
	if site["level"] != float64(1) || o["state"] != "healthy" {
		t.Fatalf("level %v, a1 %v: the suspicion must switch nothing", site["level"], o["state"])
	}
	var out bytes.Buffer
	status := exec.Command(filepath.Join(binDir, "vigil"), "status", "www", "-address", agent.api)
	status.Stdout, status.Stderr = &out, &out
	if err := status.Run(); err != nil {
		t.Fatalf("vigil status: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "path partition suspected: every voter of node/pop=eu votes down") {
		t.Fatalf("vigil status www does not show the suspicion:\n%s", out.String())
	}

	blocked.Store(0)
	waitFor(t, "the suspicion's end", 30*time.Second, func() bool {
		for _, e := range agent.events(t) {
			body := e["event"].(map[string]any)
			if body["kind"] == "path_partition_suspected" && body["suspected"] == false {
				return body["group"] == "node/pop=eu"
			}
		}
		return false
	})
	for _, e := range agent.events(t) {
		if body := e["event"].(map[string]any); body["kind"] == "level_switched" {
			t.Fatalf("a level switched during the partition: %v", body)
		}
	}
}

// socketOwnedBy reports whether the client end of a loopback connection
// (its address as the server sees it) is a socket of process pid.
func socketOwnedBy(remote string, pid int) bool {
	host, port, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	p, _ := strconv.Atoi(port)
	ip := net.ParseIP(host).To4()
	if ip == nil {
		return false
	}
	// /proc/net/tcp writes the address as the little-endian hex of the
	// IPv4 address and the big-endian hex of the port.
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], p)
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return false
	}
	defer f.Close()
	inode := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && fields[1] == want {
			inode = fields[9]
			break
		}
	}
	if inode == "" {
		return false
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && link == "socket:["+inode+"]" {
			return true
		}
	}
	return false
}
