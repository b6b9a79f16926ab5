package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/plugins/node/templates"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// grayLoad is how many visitor GETs each edge sends to the gray origin,
// and grayWindow the passive window that holds them all: one in three
// fails, 20 of 60 (33%), past the gateway's passive_failure_ratio (30%).
const (
	grayLoad   = 60
	grayWindow = 60
)

// TestPassiveVotesFromEdges: a gray origin (its health path answers 200;
// one in three of the visitors' requests 503) under bounded load through
// each edge that feeds passive windows: vigil-node's own proxy, a real
// HAProxy from Debian whose server counters (show stat) vigil-node reads,
// and Debian's nginx and Varnish whose JSON logs it tails (nginx's
// access_log of builtin:nginx, varnishncsa's of the backend fetches).
// Each gives the gateway the same hybrid verdict: the probe votes up, the
// passive vote down, 20 of 60 requests failed.
func TestPassiveVotesFromEdges(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test runs real HAProxy")
	}
	for _, tc := range []struct {
		name string
		// start starts the edge and its node; disrupt, when not nil, is
		// what the edge's operator does between two loads (a reload, a
		// log rotation).
		start func(t *testing.T, gw string, cp *fakecp.Server, origin string) (visitorURL string, disrupt func(t *testing.T))
	}{
		{"proxy", func(t *testing.T, gw string, cp *fakecp.Server, _ string) (string, func(*testing.T)) {
			node := startAgent(t, gw, "edge-1", func(c *nodeagent.Config) {
				c.ControlPlane, c.PollWait, c.ProxyListen = cp.URL(), 5*time.Second, "127.0.0.1:0"
				// Every request to a1 only, as through HAProxy: no retry on
				// another origin, no skipping a1 after its failures.
				c.Proxy.Retries, c.Proxy.FailCount = proxy.NoRetries, 1000
				c.Passive.Window = grayWindow
			})
			return "http://" + node.await(t, nodeagent.EventListening).Addr.String(), nil
		}},
		{"haproxy", func(t *testing.T, gw string, cp *fakecp.Server, _ string) (string, func(*testing.T)) {
			bin := haproxyBinary(t)
			dir := t.TempDir()
			sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
			master := startHAProxyDaemon(t, bin, dir, sock, listen)
			// No health check nor observe: HAProxy sends every request to
			// a1, as the proxy above does.
			h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: sock})
			if err != nil {
				t.Fatal(err)
			}
			startAgent(t, gw, "edge-1", func(c *nodeagent.Config) {
				c.ControlPlane, c.PollWait, c.Edges = cp.URL(), 5*time.Second, []edge.Driver{h}
				c.Edge = edge.HubOptions{Resync: 2 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
				c.Passive.Window, c.PassiveInterval = grayWindow, 50*time.Millisecond
			})
			// A graceful reload: a new process, whose counters start from
			// 0 and which has none of the servers vigil-node added until
			// the driver sees it and adds them again.
			return "http://" + listen, func(t *testing.T) {
				if err := master.Process.Signal(syscall.SIGUSR2); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, "the driver seeing HAProxy's new process", func() bool { return h.Restarts() > 0 })
			}
		}},
		{"nginx", func(t *testing.T, gw string, cp *fakecp.Server, _ string) (string, func(*testing.T)) {
			bin := edgeBinary(t, "nginx")
			dir := t.TempDir()
			listen, accessLog := testnet.Addr(t), filepath.Join(dir, "vigil-access.log")
			tm, master := startNginxDaemon(t, bin, dir)
			startAgent(t, gw, "edge-1", func(c *nodeagent.Config) {
				c.ControlPlane, c.PollWait, c.Edges = cp.URL(), 5*time.Second, []edge.Driver{tm}
				c.Edge = edge.HubOptions{Resync: 2 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
					Vars: map[string]string{"listen": listen, "access_log": accessLog}}
				c.PassiveFrom = []string{nodeagent.PassiveFromNginxLog + accessLog}
				c.Passive.Window, c.PassiveInterval = grayWindow, 50*time.Millisecond
			})
			// The shipped template's log_format is the one vigil-node reads.
			deadline := time.Now().Add(time.Minute) // catches a hang only
			b, err := os.ReadFile(filepath.Join(dir, "conf.d", "vigil.conf"))
			for ; err != nil || !strings.Contains(string(b), "access_log "); b, err = os.ReadFile(filepath.Join(dir, "conf.d", "vigil.conf")) {
				if time.Now().After(deadline) {
					t.Fatalf("the agent did not render nginx's configuration in a minute: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !strings.Contains(string(b), "log_format vigil "+nodeagent.AccessLogFormat+";") {
				t.Fatalf("the rendered nginx configuration has not log_format vigil %s:\n%s", nodeagent.AccessLogFormat, b)
			}
			// logrotate's way: the log renamed, then nginx told to reopen
			// its logs (USR1).
			return "http://" + listen, func(t *testing.T) {
				if err := os.Rename(accessLog, accessLog+".1"); err != nil {
					t.Fatal(err)
				}
				if err := master.Process.Signal(syscall.SIGUSR1); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, "nginx reopening its access log", func() bool { return fileExists(accessLog) })
			}
		}},
		{"varnish", func(t *testing.T, gw string, cp *fakecp.Server, origin string) (string, func(*testing.T)) {
			bin, ncsa := edgeBinary(t, "varnishd"), edgeBinary(t, "varnishncsa")
			dir := t.TempDir()
			listen, work, accessLog := testnet.Addr(t), filepath.Join(dir, "work"), filepath.Join(dir, "vigil-backend.json")
			host, port, err := net.SplitHostPort(strings.TrimPrefix(origin, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			// Every request passed to a1: no cache, as through the others.
			vcl := filepath.Join(dir, "a1.vcl")
			if err := os.WriteFile(vcl, []byte(fmt.Sprintf("vcl 4.1;\nbackend a1 { .host = %q; .port = %q; }\nsub vcl_recv { return (pass); }\n", host, port)), 0o644); err != nil {
				t.Fatal(err)
			}
			runDaemon(t, dir, exec.Command(bin, "-F", "-j", "none", "-n", work, "-a", listen, "-T", testnet.Addr(t), "-f", vcl,
				"-s", "malloc,16m", "-p", "thread_pools=1", "-p", "thread_pool_min=10"))
			waitUntil(t, "varnishd serving", func() bool {
				resp, err := http.Get("http://" + listen + "/warm")
				if err != nil {
					return false
				}
				_ = resp.Body.Close()
				return resp.StatusCode == 200
			})
			// In the foreground varnishncsa dies on HUP: as a daemon (-D) it
			// reopens its log, logrotate's way.
			logger := startVarnishncsa(t, ncsa, dir, "-n", work, "-b", "-j", "-F", nodeagent.VarnishncsaFormat, "-w", accessLog)
			waitUntil(t, "varnishncsa's log", func() bool { return fileExists(accessLog) })
			startAgent(t, gw, "edge-1", func(c *nodeagent.Config) {
				c.ControlPlane, c.PollWait = cp.URL(), 5*time.Second
				c.PassiveFrom = []string{nodeagent.PassiveFromAccessLog + accessLog}
				c.Passive.Window, c.PassiveInterval = grayWindow, 50*time.Millisecond
			})
			// Rotation: the log renamed, then varnishncsa told to reopen
			// it (HUP).
			return "http://" + listen, func(t *testing.T) {
				if err := os.Rename(accessLog, accessLog+".1"); err != nil {
					t.Fatal(err)
				}
				if err := logger.Signal(syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
				// It reopens at its next line: a GET writes one.
				waitUntil(t, "varnishncsa reopening its log", func() bool {
					if resp, err := http.Get("http://" + listen + "/warm"); err == nil {
						_ = resp.Body.Close()
					}
					return fileExists(accessLog)
				})
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runPassiveEdge(t, tc.start) })
	}
}

func runPassiveEdge(t *testing.T, start func(t *testing.T, gw string, cp *fakecp.Server, origin string) (string, func(*testing.T))) {
	var n atomic.Int64
	var healed atomic.Bool
	a1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/page" && n.Add(1)%3 == 0 && !healed.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "a1")
	}))
	t.Cleanup(a1.Close)
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	cp.Publish([]publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: a1.URL, State: "healthy"}}}})
	gw := startGateway(t, map[string]any{"passive_votes": true})
	visitors, disrupt := start(t, gw.Addr().String(), cp, a1.URL)
	awaitOnline(t, gw, 1)

	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	get := func(path string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, visitors+path, nil)
		req.Host = "www.example.com"
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	ballot := sdk.Ballot{Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: a1.URL, Host: "www.example.com", Path: "/cdn-health", Timeout: 5 * time.Second}}}
	round := uint64(0)
	votes := func() (probe, passive sdk.Vote) {
		t.Helper()
		round++
		ballot.Round = round
		for _, v := range vote(t, gw, ballot, 20*time.Second) {
			switch v.Voter {
			case "edge-1":
				probe = v
			case "edge-1" + PassiveSuffix:
				passive = v
			}
		}
		return probe, passive
	}
	var last sdk.Vote // the last passive vote seen, for a hang's report
	hang := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute) // catches a hang only
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("no %s after 2 minutes; the last passive vote: %+v", what, last)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The edge serves a1, and its requests reach a1's window.
	hang("a1 served", func() bool { code, err := get("/warm"); return err == nil && code == 200 })
	hang("a1's window fed", func() bool {
		if _, err := get("/warm"); err != nil {
			t.Fatal(err)
		}
		_, p := votes()
		last = p
		return p.Detail != "" && !strings.HasPrefix(p.Detail, "0 requests")
	})

	// The gray load: grayLoad GETs, one after the other.
	failed := 0
	for range grayLoad {
		code, err := get("/page")
		if err != nil {
			t.Fatal(err)
		}
		if code != 200 {
			failed++
		}
	}
	if failed != grayLoad/3 {
		t.Fatalf("%d of %d visitor GETs failed, want %d (one in three)", failed, grayLoad, grayLoad/3)
	}
	want := fmt.Sprintf("%d of %d requests failed (33%%)", grayLoad/3, grayWindow)
	var probe, passive sdk.Vote
	// Until the feed has read the whole load, the window also holds
	// warm-up GETs: it holds exactly the load once all is read.
	hang("the window holding the gray load ("+want+")", func() bool {
		probe, passive = votes()
		last = passive
		return passive.Detail == want
	})
	if probe.Value != sdk.Up || passive.Value != sdk.Down || passive.Reason != sdk.ReasonHTTP5xx {
		t.Fatalf("probe vote %+v, passive vote %+v: want the hybrid verdict, probe up and passive down http_5xx", probe, passive)
	}
	t.Logf("probe %s (%s), passive %s %s: %s", probe.Value, probe.Reason, passive.Value, passive.Reason, passive.Detail)

	// The origin heals; the edge's operator reloads it (or rotates its
	// log); grayLoad more GETs all succeed, and the window, counted from
	// the edge's new counters (or the new log), says so.
	healed.Store(true)
	if disrupt != nil {
		disrupt(t)
		client.CloseIdleConnections() // the next GETs reach the new process
	}
	hang("a1 served again", func() bool { code, err := get("/warm"); return err == nil && code == 200 })
	for range grayLoad {
		if code, err := get("/page"); err != nil || code != 200 {
			t.Fatalf("a healed origin's GET: %d %v", code, err)
		}
	}
	want = fmt.Sprintf("0 of %d requests failed (0%%)", grayWindow)
	hang("the window holding the healed load ("+want+")", func() bool {
		probe, passive = votes()
		last = passive
		return passive.Detail == want
	})
	if probe.Value != sdk.Up || passive.Value != sdk.Up {
		t.Fatalf("healed: probe vote %+v, passive vote %+v: want both up", probe, passive)
	}
}

// haproxyBinary finds Debian's haproxy (edgeBinary).
func haproxyBinary(t *testing.T) string { return edgeBinary(t, "haproxy") }

// edgeBinary finds an edge's binary from Debian; without it the test
// skips, unless CI is set.
func edgeBinary(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed and CI is set: run make deps", name)
	}
	t.Skipf("%s is not installed (make deps installs it)", name)
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// waitUntil polls cond; the deadline only catches a hang.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 2 minutes", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runDaemon runs cmd until the test ends (SIGTERM, then SIGKILL after
// 10s), its output in dir/NAME.log, shown when the test failed.
func runDaemon(t *testing.T, dir string, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	log, err := os.Create(filepath.Join(dir, filepath.Base(cmd.Path)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", cmd.Path, b)
		}
	})
	return cmd
}

// startVarnishncsa runs varnishncsa as a daemon (-D, its pid in
// dir/varnishncsa.pid) until the test ends, and returns its process.
func startVarnishncsa(t *testing.T, bin, dir string, args ...string) *os.Process {
	t.Helper()
	pidFile := filepath.Join(dir, "varnishncsa.pid")
	if out, err := exec.Command(bin, append([]string{"-D", "-P", pidFile}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("varnishncsa: %v: %s", err, out)
	}
	var pid int
	waitUntil(t, "varnishncsa's pid file", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		_, err = fmt.Sscan(string(b), &pid)
		return err == nil && pid > 0
	})
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for p.Signal(syscall.Signal(0)) == nil {
			if time.Now().After(deadline) {
				_ = p.Kill()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return p
}

// startNginxDaemon runs nginx in the foreground with its files in dir,
// including dir/conf.d/*.conf, and returns the template driver of the
// shipped builtin:nginx rendering dir/conf.d/vigil.conf, checked with
// nginx -t and reloaded with SIGHUP, and nginx's master process.
func startNginxDaemon(t *testing.T, bin, dir string) (*edge.Template, *exec.Cmd) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	conf := fmt.Sprintf(`daemon off;
%s
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    include %[2]s/conf.d/*.conf;
}
`, user, dir)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", dir+"/error.log")
	runDaemon(t, dir, cmd)
	text, err := templates.Get("nginx")
	if err != nil {
		t.Fatal(err)
	}
	ngx := fmt.Sprintf("%s -p %s -c %s -e %s/error.log", bin, dir, confPath, dir)
	tm, err := edge.NewTemplate(edge.TemplateOptions{Name: "nginx", Files: []edge.File{{Text: text, Dest: filepath.Join(dir, "conf.d", "vigil.conf")}},
		Check: ngx + " -t -q", Reload: fmt.Sprintf("kill -HUP %d", cmd.Process.Pid), MinInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // catches a hang only
	for !fileExists(filepath.Join(dir, "nginx.pid")) {
		if time.Now().After(deadline) {
			t.Fatal("nginx did not start in a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return tm, cmd
}

// startHAProxyDaemon runs haproxy (master-worker) in the foreground with
// an empty backend www for vigil-node to fill, its Runtime API on sock,
// until the test ends, waits for the socket, and returns the master.
func startHAProxyDaemon(t *testing.T, bin, dir, sock, listen string) (master *exec.Cmd) {
	t.Helper()
	cfg := fmt.Sprintf(`global
    stats socket %s mode 600 level admin
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend fe
    bind %s
    default_backend www
backend www
    balance roundrobin
`, sock, listen)
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	master = runDaemon(t, dir, exec.Command(bin, "-W", "-db", "-f", path))
	h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // catches a hang only
	for {
		if _, err := h.Command(context.Background(), "show info"); err == nil {
			return master
		} else if time.Now().After(deadline) {
			t.Fatalf("haproxy's stats socket never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
