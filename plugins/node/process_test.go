package node

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testcerts"
	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/publication"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// nodeProcess is a vigil-node subprocess whose log lines can be awaited.
type nodeProcess struct {
	cmd *exec.Cmd
	// scanned is closed once stderr is read to its end.
	scanned chan struct{}
	mu      sync.Mutex
	lines   []string
	grew    chan struct{}
}

func startNodeProcess(t *testing.T, bin string, env []string, args ...string) *nodeProcess {
	t.Helper()
	p := &nodeProcess{cmd: exec.Command(bin, args...), grew: make(chan struct{})}
	p.cmd.Env = env
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scanned := make(chan struct{})
	p.scanned = scanned
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.grew)
			p.grew = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-scanned
		_ = p.cmd.Wait()
	})
	return p
}

// awaitLine waits for a log line containing s and returns it.
func (p *nodeProcess) awaitLine(t *testing.T, s string) string {
	t.Helper()
	return p.awaitLines(t, s, 1)
}

// awaitLines waits for n log lines containing s and returns the n-th.
func (p *nodeProcess) awaitLines(t *testing.T, s string, n int) string {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for i, seen := 0, 0; ; {
		p.mu.Lock()
		lines, grew := p.lines, p.grew
		p.mu.Unlock()
		for ; i < len(lines); i++ {
			if strings.Contains(lines[i], s) {
				if seen++; seen == n {
					return lines[i]
				}
			}
		}
		select {
		case <-grew:
		case <-timeout:
			t.Fatalf("no log line with %q within 2 minutes (a hang guard: a reconnect backoff alone may wait 30 s); log:\n%s", s, strings.Join(lines, "\n"))
		}
	}
}

// TestRealProcesses runs the gateway as vigil runs it (sdktest.Launch: a
// subprocess, go-plugin handshake, only the listed env) with five real
// vigil-node processes, one of which is killed, and a sixth with a wrong
// token.
func TestRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	gwBin, nodeBin := sdktest.Build(t, "./cmd/vigil-source-node"), sdktest.Build(t, "./cmd/vigil-node")
	const token = "process-test-token"
	src := sdktest.Launch(t, gwBin, "VIGIL_NODE_TOKEN="+token)
	listen, statusAddr := testnet.Addr(t), testnet.Addr(t)
	sdktest.Configure(t, src, sdk.Config{Values: map[string]any{
		"listen": listen, "token_env": "VIGIL_NODE_TOKEN", "status_listen": statusAddr, "online_timeout": 3 * time.Second,
	}})

	env := []string{"VIGIL_NODE_TOKEN=" + token}
	procs := map[string]*nodeProcess{}
	for _, id := range ids(5) {
		procs[id] = startNodeProcess(t, nodeBin, env, "-gateway", listen, "-id", id, "-labels", "region=test", "-token-env", "VIGIL_NODE_TOKEN")
	}
	for _, p := range procs {
		p.awaitLine(t, "attached to the gateway")
	}
	intruder := startNodeProcess(t, nodeBin, []string{"WRONG=nope"}, "-gateway", listen, "-id", "intruder", "-token-env", "WRONG")
	line := intruder.awaitLine(t, "refused")
	if !strings.Contains(line, "refused this node's token") || strings.Contains(line, "nope") {
		t.Errorf("intruder's log line: %s", line)
	}

	resp, err := http.Get("http://" + statusAddr + "/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	var status struct {
		Online int          `json:"online"`
		Nodes  []NodeStatus `json:"nodes"`
	}
	err = json.NewDecoder(resp.Body).Decode(&status)
	resp.Body.Close()
	if err != nil || status.Online != 5 || len(status.Nodes) != 5 || status.Nodes[0].Labels["region"] != "test" {
		t.Fatalf("GET /v1/nodes: %+v, %v", status, err)
	}

	up := origin(t, 204)
	ballot := sdk.Ballot{Targets: []sdk.Target{
		{Site: "www", Origin: "a1", Address: up, Host: "www.example.com", Timeout: 2 * time.Second},
		{Site: "www", Origin: "a2", Address: up, Host: "www.example.com", Timeout: 2 * time.Second},
	}}
	votes := vote(t, src, ballot, 10*time.Second)
	sdktest.CheckVotes(t, ballot, votes)
	if len(votes) != 6 {
		t.Fatalf("%d votes, want 3 per origin: %+v", len(votes), votes)
	}

	victim := procs["edge-1"]
	_ = victim.cmd.Process.Kill()
	for r := range 3 {
		ballot.Round = uint64(r + 2)
		votes = vote(t, src, ballot, 10*time.Second)
		per := map[string]int{}
		for _, v := range votes {
			if v.Voter == "edge-1" && v.Value == sdk.Abstain {
				continue // chosen before the gateway saw it go: it abstains
			}
			if v.Voter == "edge-1" || v.Voter == "intruder" {
				t.Errorf("round %d: vote from %s", r, v.Voter)
			}
			if v.Value != sdk.Up {
				t.Errorf("round %d: %s voted %v: %s", r, v.Voter, v.Value, v.Detail)
			}
			per[v.Origin]++
		}
		for _, o := range []string{"a1", "a2"} {
			if per[o] < 2 {
				t.Errorf("round %d: origin %s got %d votes, want at least 2 of the 4 living nodes", r, o, per[o])
			}
		}
	}
}

// TestDaemonSignals runs a real vigil-node process that follows an https
// control plane and proxies to a slow origin on loopback: /healthz and
// /readyz answer before and after its first publication, /metrics has its
// counters at 0 from the start (checked with promtool when installed),
// SIGHUP several times re-reads its files and it keeps serving, a renewed
// -control-plane-ca is used after a SIGHUP, and SIGTERM during a slow
// request lets that request finish before the process exits 0.
func TestDaemonSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a binary")
	}
	nodeBin := sdktest.Build(t, "./cmd/vigil-node")
	dir := t.TempDir()

	started, release := make(chan struct{}, 1), make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "from the origin "+r.URL.Path)
	}))
	t.Cleanup(origin.Close)

	// The control plane: https with a certificate of CA 1, later of CA 2;
	// 503 until ready, then publication version (1, then 2).
	ca1, ca2 := testcerts.NewCA(t, "api CA 1"), testcerts.NewCA(t, "api CA 2")
	var cert atomic.Pointer[tls.Certificate]
	setCert := func(ca *testcerts.CA) {
		leaf := ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}})
		pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cert.Store(&pair)
	}
	setCert(ca1)
	var ready atomic.Bool
	var version atomic.Uint64
	version.Store(1)
	api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/publication" || !ready.Load() {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
		v := version.Load()
		if after >= v {
			select {
			case <-r.Context().Done():
			case <-time.After(200 * time.Millisecond):
			}
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_ = json.NewEncoder(w).Encode(publication.Snapshot{Version: v, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
			Origins: []publication.Origin{{Name: "a1", Address: origin.URL, State: "healthy"}}}}})
	}))
	// GetConfigForClient, not GetCertificate: a client dialing an IP sends
	// no SNI, and tls then takes the certificate httptest adds.
	api.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{Certificates: []tls.Certificate{*cert.Load()}}, nil
	}}
	api.StartTLS()
	t.Cleanup(api.Close)
	caFile := ca1.WriteCA(t, dir, "api-ca")

	proxyAddr, metricsAddr := testnet.Addr(t), testnet.Addr(t)
	node := startNodeProcess(t, nodeBin, nil, "-control-plane", api.URL, "-control-plane-ca", caFile,
		"-proxy-listen", proxyAddr, "-metrics-listen", metricsAddr, "-drain-timeout", "2m")
	node.awaitLine(t, "proxying visitor traffic")

	get := func(t *testing.T, url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	visit := func(t *testing.T, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+proxyAddr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "www.example.com"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	t.Run("before a publication", func(t *testing.T) {
		if code, body := get(t, "http://"+metricsAddr+"/healthz"); code != http.StatusOK || body != "ok\n" {
			t.Errorf("/healthz: %d %q", code, body)
		}
		if code, body := get(t, "http://"+metricsAddr+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no publication yet") {
			t.Errorf("/readyz: %d %q, want 503 saying there is no publication", code, body)
		}
		code, metrics := get(t, "http://"+metricsAddr+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		for _, want := range []string{`vigil_node_probe_jobs_total{result="down"} 0`, `vigil_node_canaries_total{result="failed"} 0`,
			`vigil_node_publication_errors_total `, `vigil_node_build_info{commit=`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics at start lacks %q", want)
			}
		}
		promtool(t, metrics)
	})

	ready.Store(true)
	node.awaitLine(t, "publication applied")
	t.Run("after a publication", func(t *testing.T) {
		if code, body := get(t, "http://"+metricsAddr+"/readyz"); code != http.StatusOK || body != "ready\n" {
			t.Errorf("/readyz: %d %q", code, body)
		}
		if code, body := get(t, "http://"+metricsAddr+"/healthz"); code != http.StatusOK {
			t.Errorf("/healthz: %d %q", code, body)
		}
		_, metrics := get(t, "http://"+metricsAddr+"/metrics")
		if !strings.Contains(metrics, `vigil_node_proxy_requests_total{code="5xx",site="www"} 0`) {
			t.Error("/metrics: the site's 5xx counter does not exist at 0 once the site is published")
		}
		promtool(t, metrics)
	})

	t.Run("SIGHUP several times", func(t *testing.T) {
		for i := 1; i <= 3; i++ {
			if err := node.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			line := node.awaitLines(t, "SIGHUP: files re-read; still running", i)
			if !strings.Contains(line, "control plane TLS") {
				t.Errorf("SIGHUP %d: the log line does not say the control plane's TLS files were re-read: %s", i, line)
			}
			if code, body := visit(t, "/after-hup"); code != http.StatusOK || body != "from the origin /after-hup" {
				t.Fatalf("after SIGHUP %d: %d %q through the proxy", i, code, body)
			}
		}
		if node.cmd.ProcessState != nil {
			t.Fatal("the process ended")
		}
	})

	t.Run("a bad file keeps the old one", func(t *testing.T) {
		bad := filepath.Join(dir, "api-ca.pem")
		testcerts.WriteFile(t, bad, []byte("not a certificate\n"))
		if err := node.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		node.awaitLine(t, "the control plane's TLS files do not load; the ones in use are kept")
		if code, _ := visit(t, "/still"); code != http.StatusOK {
			t.Fatalf("after a bad SIGHUP: %d through the proxy", code)
		}
	})

	t.Run("a renewed control plane CA is used after SIGHUP", func(t *testing.T) {
		// The API moves to CA 2 and drops its connections: the node,
		// trusting CA 1 only, cannot follow version 2 until the file holds
		// CA 2 and a SIGHUP re-reads it.
		setCert(ca2)
		version.Store(2)
		api.CloseClientConnections()
		node.awaitLine(t, "certificate signed by unknown authority")
		ca2.WriteCA(t, dir, "api-ca")
		if err := node.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		node.awaitLine(t, "version=2")
	})

	t.Run("SIGTERM drains a slow request", func(t *testing.T) {
		type answer struct {
			code int
			body string
		}
		got := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodGet, "http://"+proxyAddr+"/slow", nil)
			req.Host = "www.example.com"
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				got <- answer{body: err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got <- answer{resp.StatusCode, string(b)}
		}()
		select {
		case <-started:
		case <-time.After(20 * time.Second): // a hang guard only
			t.Fatal("the slow request did not reach the origin")
		}
		if err := node.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		node.awaitLine(t, "draining visitor connections")
		close(release)
		a := <-got
		if a.code != http.StatusOK || a.body != "from the origin /slow" {
			t.Fatalf("the request in flight at SIGTERM: %d %q, want 200 from the origin", a.code, a.body)
		}
		node.awaitLine(t, "visitor connections drained")
		<-node.scanned
		if err := node.cmd.Wait(); err != nil {
			t.Fatalf("vigil-node after SIGTERM: %v, want exit 0", err)
		}
	})
}

// promtool checks a /metrics page with promtool check metrics; without
// promtool the check is skipped, unless CI is set.
func promtool(t *testing.T, metrics string) {
	t.Helper()
	if _, err := exec.LookPath("promtool"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is missing: run make deps")
		}
		t.Log("promtool is missing (make deps installs it): the page is not checked")
		return
	}
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(metrics)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
