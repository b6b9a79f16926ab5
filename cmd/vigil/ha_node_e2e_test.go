package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/ha"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
	"github.com/vigilcdn/vigil/internal/testcerts"
	"github.com/vigilcdn/vigil/internal/testnet"
)

// nodeProc is a running vigil-node subprocess.
type nodeProc struct {
	id      string
	proxy   string // http://host:port
	metrics string // http://host:port
	mu      sync.Mutex
	log     strings.Builder
}

func (n *nodeProc) logText() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.log.String()
}

// startNode runs vigil-node with args, a proxy and a metrics listener; it
// is killed at the end of the test.
func startNode(t *testing.T, id string, env []string, args ...string) *nodeProc {
	t.Helper()
	n := &nodeProc{id: id}
	proxyAddr, metricsAddr := testnet.Addr(t), testnet.Addr(t)
	n.proxy, n.metrics = "http://"+proxyAddr, "http://"+metricsAddr
	cmd := exec.Command(filepath.Join(binDir, "vigil-node"), append([]string{"-id", id, "-proxy-listen", proxyAddr,
		"-metrics-listen", metricsAddr, "-state-dir", t.TempDir(), "-log-level", "debug"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			n.mu.Lock()
			n.log.WriteString(sc.Text() + "\n")
			n.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if strings.Contains(n.logText(), "WARNING: DATA RACE") {
			t.Errorf("the race detector found a data race in %s", id)
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", id, n.logText())
		}
	})
	return n
}

// version is the node's vigil_node_publication_version, -1 when its
// metrics cannot be read.
func (n *nodeProc) version() int64 {
	resp, err := http.Get(n.metrics + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "vigil_node_publication_version "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return int64(f)
		}
	}
	return -1
}

// get asks the node's proxy for www.example.com: the status and body.
func (n *nodeProc) get() (int, string) {
	req, _ := http.NewRequest(http.MethodGet, n.proxy+"/page", nil)
	req.Host = "www.example.com"
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// nodeMember starts one agent of an active/standby cluster whose only
// source is the node gateway listening on gateway; nodes read the API
// with the node token.
func nodeMember(t *testing.T, id, endpoint, gateway, sites string) *agentProc {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = %q
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen         = %q
    token_env      = "VIGIL_TOKEN"
    node_token_env = "VIGIL_NODE_API_TOKEN"
  }
  store "etcd" {
    endpoints = [%q]
    prefix    = "/vigil-e2e"
    lease_ttl = %q
    mode      = "active-standby"
    id        = %q
  }
}
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 1
  timeout   = "2s"
  env       = ["VIGIL_NODE_TOKEN"]
  config {
    listen         = %q
    token_env      = "VIGIL_NODE_TOKEN"
    online_timeout = "3s"
  }
}
`, haRound.String(), filepath.Join(dir, "data"), binDir, testnet.Addr(t), endpoint, haLeaseTTL.String(), id, gateway) + sites
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startAgentProc(t, path)
}

// onlineNodes is how many nodes the agent's gateway lists online.
func onlineNodes(p *agentProc) int {
	req, _ := http.NewRequest(http.MethodGet, p.api+"/v1/nodes", nil)
	req.Header.Set("Authorization", "Bearer e2e-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var out api.NodesAnswer
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		return -1
	}
	return len(out.Nodes)
}

// publishedLevel is the agent's current publication version and the level
// it publishes for www (0 when it cannot be read).
func publishedLevel(p *agentProc) (int64, int) {
	req, _ := http.NewRequest(http.MethodGet, p.api+"/v1/publication", nil)
	req.Header.Set("Authorization", "Bearer e2e-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	var snap struct {
		Version int64 `json:"version"`
		Sites   []struct {
			Name  string `json:"site"`
			Level int    `json:"level"`
		} `json:"sites"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&snap) != nil {
		return 0, 0
	}
	for _, s := range snap.Sites {
		if s.Name == "www" {
			return snap.Version, s.Level
		}
	}
	return snap.Version, 0
}

// publicationVersion is the agent's current publication version, -1 when
// it cannot be read.
func publicationVersion(p *agentProc) int64 {
	req, _ := http.NewRequest(http.MethodGet, p.api+"/v1/publication", nil)
	req.Header.Set("Authorization", "Bearer e2e-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var snap struct {
		Version int64 `json:"version"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&snap) != nil {
		return -1
	}
	return snap.Version
}

// TestHANodesFollowTheCluster: two agents on one etcd (etcd at its
// defaults), two real vigil-nodes each given both agents and both
// gateways (in opposite orders) and proxying. The leader is killed with
// SIGKILL and level 1's origins fail at once: the other agent takes over,
// its gateway already has both nodes, its rounds fail www over to level
// 2, and every node's proxy serves level 2 under a publication version
// newer than the one it served before: 0 stale edges. The time from the
// kill to the last node serving level 2 is logged.
func TestHANodesFollowTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	srv := etcdtest.Start(t)
	origins := map[string]*demoorigin.Server{}
	addr := map[string]string{}
	for _, n := range []string{"a1", "a2", "b1"} {
		s := demoorigin.New(n)
		h := httptest.NewServer(s)
		t.Cleanup(h.Close)
		origins[n], addr[n] = s, h.URL
	}
	sites := fmt.Sprintf(`
site "www" {
  hostname = "www.example.com"
  health_check {
    timeout             = "500ms"
    unhealthy_threshold = 2
    healthy_threshold   = 2
  }
  origin "a1" { address = %q }
  origin "a2" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, addr["a1"], addr["a2"], addr["b1"])
	t.Setenv("VIGIL_NODE_TOKEN", "node-secret")
	t.Setenv("VIGIL_NODE_API_TOKEN", "node-api-secret")
	gateways := []string{testnet.Addr(t), testnet.Addr(t)}
	procs := []*agentProc{
		nodeMember(t, "cp-a", srv.Endpoint, gateways[0], sites),
		nodeMember(t, "cp-b", srv.Endpoint, gateways[1], sites),
	}
	var leader *agentProc
	waitFor(t, "a leader", 20*time.Second, func() bool { leader = leaderOf(t, procs); return leader != nil })

	env := []string{"VIGIL_NODE_TOKEN=node-secret", "VIGIL_NODE_API_TOKEN=node-api-secret"}
	args := func(order ...int) []string {
		var cps, gws []string
		for _, i := range order {
			cps, gws = append(cps, procs[i].api), append(gws, gateways[i])
		}
		return []string{"-control-plane", strings.Join(cps, ","), "-control-plane-token-env", "VIGIL_NODE_API_TOKEN",
			"-gateway", strings.Join(gws, ","), "-token-env", "VIGIL_NODE_TOKEN"}
	}
	nodes := []*nodeProc{
		startNode(t, "edge-1", env, args(0, 1)...),
		startNode(t, "edge-2", env, args(1, 0)...),
	}
	level1 := func(body string) bool {
		return strings.HasPrefix(body, "hello from a1") || strings.HasPrefix(body, "hello from a2")
	}
	waitFor(t, "level 1 healthy and both proxies serving it", 60*time.Second, func() bool {
		if leader.site(t, "www")["levels"].(map[string]any)["1"] != "healthy" {
			return false
		}
		for _, n := range nodes {
			if code, body := n.get(); code != http.StatusOK || !level1(body) {
				return false
			}
		}
		return true
	})
	// Every gateway has both nodes, the standby's too: a takeover finds
	// them attached.
	for _, p := range procs {
		waitFor(t, "both nodes attached to "+p.api, 30*time.Second, func() bool { return onlineNodes(p) == 2 })
	}
	before := map[string]int64{}
	for _, n := range nodes {
		before[n.id] = n.version()
		if before[n.id] < 1 {
			t.Fatalf("%s serves publication version %d before the kill", n.id, before[n.id])
		}
	}

	killed := time.Now()
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	origins["a1"].SetMode(demoorigin.Failing)
	origins["a2"].SetMode(demoorigin.Failing)
	var next *agentProc
	for _, p := range procs {
		if p != leader {
			next = p
		}
	}

	// The new leader publishes www at level 2 (version v2); every node
	// serves that publication and its proxy level 2. (A node's proxy
	// answers from b1 at once when level 1 fails a request, by the
	// publication's backup level: that alone proves nothing, so the node's
	// publication version is what is waited for.) The hang guard only
	// catches a hang.
	var v2 int64
	var published time.Duration
	served := map[string]time.Duration{}
	waitFor(t, "every node to serve the new leader's level 2", 120*time.Second, func() bool {
		if v2 == 0 {
			if v, level := publishedLevel(next); level == 2 {
				v2, published = v, time.Since(killed)
			} else {
				return false
			}
		}
		for _, n := range nodes {
			if _, ok := served[n.id]; ok {
				continue
			}
			if n.version() < v2 {
				continue
			}
			if code, body := n.get(); code == http.StatusOK && strings.HasPrefix(body, "hello from b1") {
				served[n.id] = time.Since(killed)
			}
		}
		return len(served) == len(nodes)
	})
	var last time.Duration
	for _, d := range served {
		last = max(last, d)
	}
	t.Logf("from the SIGKILL of the leader (and level 1 failing) to the new leader publishing level 2 (version %d): %s; to the last node serving it: %s (lease_ttl %s, round_interval %s, unhealthy_threshold 2; per node %v)",
		v2, published.Round(time.Millisecond), last.Round(time.Millisecond), haLeaseTTL, haRound, served)

	if info, ok := next.cluster(t); !ok || info.Role != ha.RoleLeader {
		t.Fatalf("the surviving agent is not the leader: %+v", info)
	}
	if got := next.site(t, "www")["level"]; got != float64(2) {
		t.Fatalf("the new leader has www at level %v, want 2", got)
	}
	if onlineNodes(next) != 2 {
		t.Fatalf("the new leader's gateway lists %d nodes online, want 2", onlineNodes(next))
	}
	// 0 stale edges: every node serves the new leader's publication
	// version, newer than the one it served before the kill (the new
	// leader continued the stored sequence).
	want := publicationVersion(next)
	stale := 0
	for _, n := range nodes {
		got := n.version()
		if got <= before[n.id] || got != want {
			stale++
			t.Errorf("%s serves publication version %d (before the kill %d, the new leader's %d)", n.id, got, before[n.id], want)
		}
		// It followed the leader, and then the new one: the publication
		// did not reach it by chance through a standby it was left on.
		var moved bool
		for _, line := range strings.Split(n.logText(), "\n") {
			if strings.Contains(line, "following the publication of another control plane") && strings.Contains(line, "control_plane="+next.api) {
				moved = true
			}
		}
		if !moved {
			t.Errorf("%s never logged that it follows %s", n.id, next.api)
		}
		if strings.Contains(n.logText(), "refused an older publication") {
			t.Logf("%s refused an older publication on the way (a standby not caught up yet)", n.id)
		}
	}
	if stale != 0 {
		t.Fatalf("%d stale edges, want 0", stale)
	}
}

// TestNodeFollowsHTTPSAPI: a real agent serves its API over https with a
// node token; a real vigil-node given -control-plane-ca follows it and
// proxies its site; one given another CA serves nothing and logs what to
// do.
func TestNodeFollowsHTTPSAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	dir := t.TempDir()
	ca, other := testcerts.NewCA(t, "vigil e2e CA"), testcerts.NewCA(t, "another CA")
	caFile, otherFile := ca.WriteCA(t, dir, "ca"), other.WriteCA(t, dir, "other")
	ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}}).Write(t, dir, "api")
	origin := httptest.NewServer(demoorigin.New("a1"))
	t.Cleanup(origin.Close)
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = "200ms"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen         = "127.0.0.1:0"
    token_env      = "VIGIL_TOKEN"
    node_token_env = "VIGIL_NODE_API_TOKEN"
    tls {
      cert_file = "api.crt"
      key_file  = "api.key"
    }
  }
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = %q }
  origin "a2" { address = %q }
}
`, filepath.Join(dir, "data"), binDir, origin.URL, origin.URL+"/")
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgentBin(t, filepath.Join(binDir, "vigil"), config, "VIGIL_NODE_API_TOKEN=node-api-secret")
	if !strings.HasPrefix(p.api, "https://") {
		t.Fatalf("the agent's listen file says %s; want an https:// URL", p.api)
	}
	env := []string{"VIGIL_NODE_API_TOKEN=node-api-secret"}
	good := startNode(t, "edge-1", env, "-control-plane", p.api, "-control-plane-token-env", "VIGIL_NODE_API_TOKEN", "-control-plane-ca", caFile)
	bad := startNode(t, "edge-2", env, "-control-plane", p.api, "-control-plane-token-env", "VIGIL_NODE_API_TOKEN", "-control-plane-ca", otherFile)
	waitFor(t, "the node with the right CA to proxy www", 60*time.Second, func() bool {
		code, body := good.get()
		return code == http.StatusOK && strings.HasPrefix(body, "hello from a1")
	})
	const fix = "signed by a CA this node does not trust: give the CA's certificate with -control-plane-ca FILE"
	waitFor(t, "the node with another CA to log what to do", 60*time.Second, func() bool { return strings.Contains(bad.logText(), fix) })
	if code, _ := bad.get(); code == http.StatusOK {
		t.Fatalf("the node that trusts another CA serves www: it followed an API it cannot verify")
	}
	if v := bad.version(); v != 0 {
		t.Fatalf("the node that trusts another CA serves publication version %d, want none (0)", v)
	}
	if strings.Contains(good.logText(), "node-api-secret") || strings.Contains(bad.logText(), "node-api-secret") {
		t.Fatal("a node logged its API token")
	}
}
