package edge_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/plugins/node/templates"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// The detection window: from the moment every origin of a site's current
// level fails until the control plane's switch, each edge routes around the
// failing level on its own (its next level's origins as backup servers).

// windowRate is the load of the window tests (GETs a second);
// windowRequests is how many GETs the window lasts: 6 s at that rate,
// shorter than any real detection window (unhealthy_threshold rounds), so
// the failures a window costs once (HAProxy: one per failing origin) weigh
// more here than they would. reloadRequests is how many GETs the reload
// tests count from the reload on.
const (
	windowRate     = 50
	windowRequests = 300
	reloadRequests = 200
)

// failMode is how the current level's origins fail.
type failMode int

const (
	answer503 failMode = iota + 1 // they answer 503
	refuse                        // they refuse connections
)

func (m failMode) String() string {
	if m == answer503 {
		return "503"
	}
	return "refused"
}

// flakyOrigin is a loopback origin answering its name, that can be made to
// answer 503 or to refuse connections (its listener closed), and restored
// on the same address.
type flakyOrigin struct {
	name, addr string
	fail503    atomic.Bool

	mu  sync.Mutex
	srv *http.Server
}

func newFlakyOrigin(t *testing.T, name string) *flakyOrigin {
	f := &flakyOrigin{name: name, addr: testnet.Addr(t)}
	f.listen(t)
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.srv != nil {
			_ = f.srv.Close()
		}
	})
	return f
}

func (f *flakyOrigin) url() string { return "http://" + f.addr }

func (f *flakyOrigin) listen(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	waitFor(t, func() error { // the port of a closed listener may linger a moment
		ln, err = net.Listen("tcp", f.addr)
		return err
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if f.fail503.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, f.name+" failing")
			return
		}
		_, _ = io.WriteString(w, f.name)
	})}
	go func() { _ = srv.Serve(ln) }()
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
}

func (f *flakyOrigin) fail(m failMode) {
	if m == answer503 {
		f.fail503.Store(true)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.srv.Close() // the listener and every connection: new ones are refused
	f.srv = nil
}

func (f *flakyOrigin) restore(t *testing.T) {
	f.fail503.Store(false)
	f.mu.Lock()
	closed := f.srv == nil
	f.mu.Unlock()
	if closed {
		f.listen(t)
	}
}

// flakyLevels is a site with two level-1 origins that can fail and one
// level-2 origin.
type flakyLevels struct {
	one []*flakyOrigin
	b1  *flakyOrigin
}

func newFlakyLevels(t *testing.T) *flakyLevels {
	return &flakyLevels{one: []*flakyOrigin{newFlakyOrigin(t, "a1"), newFlakyOrigin(t, "a2")}, b1: newFlakyOrigin(t, "b1")}
}

func (l *flakyLevels) site(level int) []publication.Site {
	var origins []publication.Origin
	if level == 1 {
		for _, o := range l.one {
			origins = append(origins, publication.Origin{Name: o.name, Address: o.url(), State: "healthy"})
		}
	} else {
		origins = []publication.Origin{{Name: "b1", Address: l.b1.url(), State: "healthy"}}
	}
	site := publication.Site{Name: "www", Hostname: hostname, Level: level, Origins: origins}
	if level == 1 {
		// As the control plane publishes it: level 2 is the next level.
		site.Backup = &publication.Backup{Level: 2, Origins: []publication.Origin{{Name: "b1", Address: l.b1.url(), State: "healthy"}}}
	}
	return []publication.Site{site}
}

func (l *flakyLevels) topology() []map[string]any {
	origins := map[string]any{"b1": map[string]any{"level": 2, "address": l.b1.url(), "state": "healthy"}}
	for _, o := range l.one {
		origins[o.name] = map[string]any{"level": 1, "address": o.url(), "state": "healthy"}
	}
	return []map[string]any{{"site": "www", "origins": origins}}
}

// startAgentResync runs a vigil-node agent with the given resync period.
func startAgentResync(t *testing.T, cp *fakecp.Server, resync time.Duration, vars map[string]string, drivers ...edge.Driver) *nodeagent.Agent {
	t.Helper()
	a, err := nodeagent.New(nodeagent.Config{ControlPlane: cp.URL(), Edges: drivers, PollWait: 10 * time.Second,
		Edge: edge.HubOptions{Vars: vars, Resync: resync, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond},
		Log:  hclog.New(&hclog.LoggerOptions{Level: logLevel(), Output: testWriter{t}})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

// windowHAProxyConfig is the haproxy.cfg plugins/node/README.md documents
// for the runtime driver: L7 retries of idempotent requests on another
// server, HTTP health checks that keep a 5xx origin down, and every backup
// server used when the current level is down.
func windowHAProxyConfig(sock, listen string) string {
	return fmt.Sprintf(`global
    stats socket %s mode 600 level admin
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout 502 503 504
frontend fe
    bind %s
    http-request disable-l7-retry unless METH_GET || METH_HEAD
    use_backend www if { req.hdr(host),lower,word(1,:) -m str %s }
backend www
    balance roundrobin
    option allbackups
    option httpchk
    http-check send meth HEAD uri / ver HTTP/1.1 hdr host %[3]s
    http-check expect ! rstatus ^5
`, sock, listen, hostname)
}

// window is one run: level 1 serves under load, fails (mode), the edge
// covers with level 2 for windowRequests GETs, vigil switches to level 2,
// level 1 recovers while level 2 stays primary, vigil fails back. Each
// stage waits on answers, never on the clock. checkSwitched and
// checkBack, when set, look at the edge's own state after the switch and
// after the failback.
func window(t *testing.T, edgeName, url string, a *nodeagent.Agent, cp *fakecp.Server, l *flakyLevels, mode failMode, checkSwitched, checkBack func(t *testing.T)) {
	one := []string{"a1", "a2"}
	// The agent's first apply (publication 1, with its backup level) is
	// done before the window: its reload is not part of what is measured.
	waitFor(t, func() error {
		for _, s := range a.EdgeStatus() {
			if s.Applied < 1 || s.Err != nil {
				return fmt.Errorf("edge %s: publication 1 not applied yet (applied %d, error %v)", s.Edge, s.Applied, s.Err)
			}
		}
		return nil
	})
	if checkBack != nil {
		checkBack(t) // level 2 is the backup level
	}
	waitServing(t, url, one)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ld := startLoadConns(ctx, url, windowRate, 2, true)
	t.Cleanup(func() { cancel(); ld.wg.Wait() })

	start := time.Now()
	ld.waitAnswers(t, start, windowRate) // about a second of level 1 serving
	failed := time.Now()
	for _, o := range l.one {
		o.fail(mode)
	}
	ld.waitAnswers(t, failed, windowRequests)
	switched := time.Now()
	cp.Publish(l.site(2))
	ld.firstFrom(t, switched, []string{"b1"})
	ld.waitAnswers(t, switched, windowRate/2)
	if checkSwitched != nil {
		checkSwitched(t)
	}
	// Level 1 recovers: level 2 is the current level now, level 1 its
	// backup, unused while b1 serves.
	for _, o := range l.one {
		o.restore(t)
	}
	recovered := time.Now()
	ld.waitAnswers(t, recovered, windowRate)
	back := time.Now()
	cp.Publish(l.site(1))
	ld.firstFrom(t, back, one)
	// Level 1 alone from when the edge runs the failback's configuration
	// only (checkBack: an old worker of a reload may still accept for a
	// moment after the new one answers).
	if checkBack != nil {
		checkBack(t)
	}
	settled := time.Now()
	ld.waitAnswers(t, settled, windowRate)
	end := time.Now()
	cancel()
	ld.wg.Wait()

	type tally struct{ total, failed, byLevel2 int }
	countIf := func(in func(s sample) bool) (c tally, firstErr error) {
		ld.mu.Lock()
		defer ld.mu.Unlock()
		for _, s := range ld.samples {
			if !in(s) {
				continue
			}
			c.total++
			switch {
			case s.err != nil:
				c.failed++
				if firstErr == nil {
					firstErr = s.err
				}
			case s.body == "b1":
				c.byLevel2++
			}
		}
		return c, firstErr
	}
	// count tallies the GETs sent at or after from that ended before to
	// (the stages before and after the window).
	count := func(from, to time.Time) (tally, error) {
		return countIf(func(s sample) bool { return !s.start.Before(from) && s.end.Before(to) })
	}
	before, err := count(start, failed)
	if before.failed > 0 || before.byLevel2 > 0 {
		t.Errorf("level 1 healthy: %d of %d GETs failed (%v), %d served by level 2: the current level must serve alone", before.failed, before.total, err, before.byLevel2)
	}
	// The window, by the GETs' start: every GET sent before the switch
	// was published that was still open when level 1 failed.
	win, err := countIf(func(s sample) bool { return s.start.Before(switched) && !s.end.Before(failed) })
	t.Logf("EDGE %s, level 1 %s: %d of %d GETs failed between the failure and the switch (%d served by level 2); first failure: %v",
		edgeName, mode, win.failed, win.total, win.byLevel2, err)
	if win.failed*100 > win.total {
		t.Errorf("%d of %d GETs failed between the failure and the switch: more than 1%%", win.failed, win.total)
	}
	if win.byLevel2 == 0 {
		t.Errorf("level 2 served none of the %d GETs before the switch", win.total)
	}
	primary, err := count(recovered, back)
	if primary.failed > 0 || primary.byLevel2 != primary.total {
		t.Errorf("level 2 current, level 1 recovered: %d of %d GETs by level 2, %d failed (%v): level 2 must be primary", primary.byLevel2, primary.total, primary.failed, err)
	}
	after, err := count(settled, end)
	if after.failed > 0 || after.byLevel2 > 0 {
		t.Errorf("after the failback: %d of %d GETs failed (%v), %d by level 2: level 1 must serve alone", after.failed, after.total, err, after.byLevel2)
	}
	all, _ := countIf(func(s sample) bool { return !s.start.Before(start) })
	reportWindow(edgeName, mode, win.failed, win.total, all.failed, all.total)
}

// reportWindow appends the window's figures to $VIGIL_EDGE_REPORT when set.
func reportWindow(edgeName string, mode failMode, failed, total, allFailed, all int) {
	path := os.Getenv("VIGIL_EDGE_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\twindow=%s\tfailed=%d/%d\trun=%d/%d\n", edgeName, mode, failed, total, allFailed, all)
}

// serverStates is show servers state of backend www: each server's admin
// state (ready, maint, drain).
func serverStates(t *testing.T, h *edge.HAProxy) map[string]string {
	t.Helper()
	out, err := h.Command(context.Background(), "show servers state www")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 7 || strings.HasPrefix(l, "#") {
			continue
		}
		admin, err := strconv.Atoi(f[6]) // srv_admin_state
		switch {
		case err != nil:
			t.Fatalf("show servers state: %q", l)
		case admin&0x01 != 0: // forced maintenance; 0x04 alone is a disabled server of haproxy.cfg made ready
			got[f[3]] = "maint"
		case admin&0x08 != 0:
			got[f[3]] = "drain"
		default:
			got[f[3]] = "ready"
		}
	}
	return got
}

func wantStates(t *testing.T, h *edge.HAProxy, stage string, want map[string]string) {
	t.Helper()
	got := serverStates(t, h)
	for name, st := range want {
		if got[name] != st {
			t.Errorf("%s: server %s is %q, want %q (servers %v)", stage, name, got[name], st, got)
		}
	}
}

// TestHAProxyCoversWindow: with the documented haproxy.cfg and the driver's
// default server arguments, HAProxy serves from level 2 (backup servers)
// while both level-1 origins answer 503 or refuse connections, before
// vigil switches; after the switch level 2 is primary and level 1 its
// backup; after the failback, level 1 again.
func TestHAProxyCoversWindow(t *testing.T) {
	bin := peer(t, "haproxy")
	for _, mode := range []failMode{answer503, refuse} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
			startHAProxy(t, bin, dir, windowHAProxyConfig(sock, listen), sock)
			l := newFlakyLevels(t)
			cp := fakecp.New()
			t.Cleanup(cp.Close)
			if err := cp.SetSites(l.topology()); err != nil {
				t.Fatal(err)
			}
			cp.Publish(l.site(1))
			h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: sock, ServerArgs: edge.DefaultHAProxyServerArgs})
			if err != nil {
				t.Fatal(err)
			}
			a := startAgentResync(t, cp, 10*time.Minute, nil, h)
			// Level 2's backup server is ready from the first publication
			// (its Backup); level 1's twins (a1:backup, a2:backup) come
			// with the topology, read after it: wait for both.
			level1 := map[string]string{"a1": "ready", "a2": "ready", "b1": "maint",
				"a1:backup": "maint", "a2:backup": "maint", "b1:backup": "ready"}
			waitFor(t, func() error {
				st := serverStates(t, h)
				for name, want := range level1 {
					if st[name] != want {
						return fmt.Errorf("server %s is %q, want %q: %v", name, st[name], want, st)
					}
				}
				return nil
			})
			wantStates(t, h, "level 1", level1)
			window(t, "haproxy-runtime", "http://"+listen+"/", a, cp, l, mode,
				func(t *testing.T) {
					waitFor(t, func() error {
						if st := serverStates(t, h); st["a1"] != "maint" {
							return fmt.Errorf("a1 not in maintenance yet: %v", st)
						}
						return nil
					})
					wantStates(t, h, "level 2", map[string]string{"a1": "maint", "a2": "maint", "b1": "ready",
						"a1:backup": "ready", "a2:backup": "ready", "b1:backup": "maint"})
				},
				func(t *testing.T) { wantStates(t, h, "failed back to level 1", level1) })
		})
	}
}

// TestNginxCoversWindow: the shipped nginx template covers the window the
// same way (the next level's origins are backup servers, and
// proxy_next_upstream tries every server once).
func TestNginxCoversWindow(t *testing.T) {
	bin := peer(t, "nginx")
	text, err := templates.Get("nginx")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []failMode{answer503, refuse} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			listen := testnet.Addr(t)
			if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			confPath := filepath.Join(dir, "nginx.conf")
			writeFile(t, confPath, nginxConfig(dir, "1", 1024, "    include "+dir+"/conf.d/*.conf;"))
			cmd := daemon(t, dir, bin, "-p", dir, "-c", confPath, "-e", dir+"/error.log")
			ngx := fmt.Sprintf("%s -p %s -c %s -e %s/error.log", bin, dir, confPath, dir)
			vigilConf := filepath.Join(dir, "conf.d", "vigil.conf")
			tm, err := edge.NewTemplate(edge.TemplateOptions{Name: "nginx", Files: []edge.File{{Text: text, Dest: vigilConf}},
				Check: ngx + " -t -q", Reload: fmt.Sprintf("kill -HUP %d", cmd.Process.Pid), MinInterval: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() error {
				if !fileExists(filepath.Join(dir, "nginx.pid")) {
					return errors.New("nginx has not started")
				}
				return nil
			})
			l := newFlakyLevels(t)
			cp := fakecp.New()
			t.Cleanup(cp.Close)
			if err := cp.SetSites(l.topology()); err != nil {
				t.Fatal(err)
			}
			cp.Publish(l.site(1))
			a := startAgentResync(t, cp, 10*time.Minute, map[string]string{"listen": listen}, tm)
			backup := func(addr string) func() error {
				return func() error {
					b, _ := os.ReadFile(vigilConf)
					if !strings.Contains(string(b), "server "+addr+" backup;") {
						return fmt.Errorf("%s is not a backup server yet:\n%s", addr, b)
					}
					return nil
				}
			}
			waitFor(t, backup(l.b1.addr))
			window(t, "nginx-template", "http://"+listen+"/", a, cp, l, mode,
				func(t *testing.T) { waitFor(t, backup(l.one[0].addr)) },
				func(t *testing.T) {
					waitFor(t, backup(l.b1.addr))
					waitFor(t, func() error { return oneWorker(cmd.Process.Pid) })
				})
		})
	}
}

// TestHAProxyReload: HAProxy reloaded (SIGUSR2 to the master) under load
// starts a worker with haproxy.cfg's servers only; vigil-node sees the new
// process and applies the publication again at once, long before its
// resync (10 minutes here).
func TestHAProxyReload(t *testing.T) {
	bin := peer(t, "haproxy")
	for _, fallback := range []bool{false, true} {
		name := "runtime only"
		if fallback {
			name = "with the fallback template"
		}
		t.Run(name, func(t *testing.T) { haproxyReload(t, bin, fallback) })
	}
}

// haproxyReload is one run of TestHAProxyReload: with fallback, HAProxy
// runs on the haproxy.cfg vigil-node renders at every publication
// (-haproxy-fallback), which a reload starts from.
func haproxyReload(t *testing.T, bin string, fallback bool) {
	dir := t.TempDir()
	sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
	path := filepath.Join(dir, "haproxy.cfg")
	l := newFlakyLevels(t)
	opts := edge.HAProxyOptions{Socket: sock, ServerArgs: edge.DefaultHAProxyServerArgs}
	var vars map[string]string
	if fallback {
		text, err := templates.Get("haproxy")
		if err != nil {
			t.Fatal(err)
		}
		// Reloaded by vigil-node only when the runtime cannot apply a
		// publication, which does not happen here.
		opts.Fallback, err = edge.NewTemplate(edge.TemplateOptions{Name: "haproxy-fallback", Files: []edge.File{{Text: text, Dest: path}},
			Check: bin + " -c -q -f " + edge.CandidatePlaceholder, Reload: "false"})
		if err != nil {
			t.Fatal(err)
		}
		vars = map[string]string{"listen": listen, "stats_socket": sock}
		topo := edge.Topology{"www": {{Name: "b1", Address: l.b1.url(), Level: 2, State: "healthy"}}}
		for _, o := range l.one {
			topo["www"] = append(topo["www"], edge.LevelOrigin{Name: o.name, Address: o.url(), Level: 1, State: "healthy"})
		}
		v, _ := edge.Build(snapshotOf(1, l.site(1)), topo, "", vars)
		if _, err := opts.Fallback.Write(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	} else {
		writeFile(t, path, windowHAProxyConfig(sock, listen))
	}
	master := daemon(t, dir, bin, "-W", "-db", "-f", path, "-S", filepath.Join(dir, "master.sock"))
	direct, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	pid := func() string {
		out, err := direct.Command(context.Background(), "show info")
		if err != nil {
			return ""
		}
		for _, l := range strings.Split(out, "\n") {
			if p, ok := strings.CutPrefix(l, "Pid: "); ok {
				return strings.TrimSpace(p)
			}
		}
		return ""
	}
	waitFor(t, func() error {
		if pid() == "" {
			return errors.New("haproxy's stats socket does not answer")
		}
		return nil
	})
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	if err := cp.SetSites(l.topology()); err != nil {
		t.Fatal(err)
	}
	cp.Publish(l.site(1))
	h, err := edge.NewHAProxy(opts)
	if err != nil {
		t.Fatal(err)
	}
	startAgentResync(t, cp, 10*time.Minute, vars, h)
	url := "http://" + listen + "/"
	waitServing(t, url, []string{"a1", "a2"})
	want := map[string]string{"a1": "ready", "a2": "ready", "b1": "maint", "b1:backup": "ready"}
	applied := func() error {
		st := serverStates(t, direct)
		for name, s := range want {
			if st[name] != s {
				return fmt.Errorf("server %s is %q, want %q (servers %v)", name, st[name], s, st)
			}
		}
		return nil
	}
	waitFor(t, applied)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ld := startLoad(ctx, url, windowRate, 2)
	t.Cleanup(func() { cancel(); ld.wg.Wait() })
	start := time.Now()
	ld.waitAnswers(t, start, windowRate)
	old := pid()
	reloaded := time.Now()
	if err := master.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() error {
		if p := pid(); p == old || p == "" {
			return fmt.Errorf("no new worker yet (pid %q)", p)
		}
		return nil
	})
	// Back before any resync: the driver saw the new process.
	waitFor(t, applied)
	back := time.Now()
	ld.waitAnswers(t, reloaded, reloadRequests)
	cancel()
	ld.wg.Wait()
	if n := h.Restarts(); n != 1 {
		t.Errorf("the driver saw %d new HAProxy processes, want 1", n)
	}
	var total, failed int
	var first error
	ld.mu.Lock()
	for _, s := range ld.samples {
		if s.end.Before(reloaded) {
			if s.err != nil {
				t.Errorf("before the reload: %v", s.err)
			}
			continue
		}
		total++
		if s.err != nil {
			failed++
			if first == nil {
				first = s.err
			}
		}
	}
	ld.mu.Unlock()
	t.Logf("EDGE haproxy-runtime reload (%s): servers back %s after SIGUSR2; %d of %d GETs failed after the reload; first failure: %v",
		t.Name(), back.Sub(reloaded).Round(time.Millisecond), failed, total, first)
	if fallback && failed > 0 {
		t.Errorf("%d of %d GETs failed after the reload: the rendered haproxy.cfg has every server", failed, total)
	}
	if failed*20 > total {
		t.Errorf("%d of %d GETs failed after the reload: more than 5%%", failed, total)
	}
}

// TestHAProxyTemplateCoversWindow: HAProxy on the shipped haproxy.cfg
// template alone (rendered and reloaded at each switch) covers the window
// too: the next level's servers are backup servers there.
func TestHAProxyTemplateCoversWindow(t *testing.T) {
	bin := peer(t, "haproxy")
	text, err := templates.Get("haproxy")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []failMode{answer503, refuse} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
			cfgPath := filepath.Join(dir, "haproxy.cfg")
			pidPath := filepath.Join(dir, "master.pid")
			tm, err := edge.NewTemplate(edge.TemplateOptions{Name: "haproxy", Files: []edge.File{{Text: text, Dest: cfgPath}},
				Check: bin + " -c -q -f " + edge.CandidatePlaceholder, Reload: "kill -USR2 $(cat " + pidPath + ")",
				MinInterval: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			l := newFlakyLevels(t)
			vars := map[string]string{"listen": listen, "stats_socket": sock}
			topo := edge.Topology{"www": {{Name: "b1", Address: l.b1.url(), Level: 2, State: "healthy"}}}
			for _, o := range l.one {
				topo["www"] = append(topo["www"], edge.LevelOrigin{Name: o.name, Address: o.url(), Level: 1, State: "healthy"})
			}
			v, _ := edge.Build(snapshotOf(1, l.site(1)), topo, "", vars)
			if _, err := tm.Write(context.Background(), v); err != nil {
				t.Fatal(err)
			}
			daemon(t, dir, bin, "-W", "-db", "-f", cfgPath, "-p", pidPath)
			waitFor(t, func() error {
				if !fileExists(pidPath) {
					return errors.New("no pid file yet")
				}
				return nil
			})
			cp := fakecp.New()
			t.Cleanup(cp.Close)
			if err := cp.SetSites(l.topology()); err != nil {
				t.Fatal(err)
			}
			cp.Publish(l.site(1))
			a := startAgentResync(t, cp, 10*time.Minute, vars, tm)
			backup := func(name string) func(t *testing.T) {
				return func(t *testing.T) {
					waitFor(t, func() error {
						b, _ := os.ReadFile(cfgPath)
						if !regexp.MustCompile(`(?m)^    server ` + name + edge.BackupSuffix + ` \S+ backup$`).Match(b) {
							return fmt.Errorf("%s is not a backup server yet:\n%s", name, b)
						}
						return nil
					})
				}
			}
			window(t, "haproxy-template", "http://"+listen+"/", a, cp, l, mode, backup("a1"), backup("b1"))
		})
	}
}

// TestHAProxyBackupRoles: with three levels, the runtime driver gives each
// origin's two servers (plain and backup) their roles at every switch:
// the current level's plain servers ready, the next level's (or, for the
// last level, the one before's) backup servers ready, every other server in
// maintenance; a server declared in haproxy.cfg (a1) gets its backup
// server from vigil-node like the others.
func TestHAProxyBackupRoles(t *testing.T) {
	bin := peer(t, "haproxy")
	dir := t.TempDir()
	sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
	a1, b1, c1 := origin(t, "a1"), origin(t, "b1"), origin(t, "c1")
	cfg := windowHAProxyConfig(sock, listen) + "    server a1 " + strings.TrimPrefix(a1.URL, "http://") + " check\n"
	startHAProxy(t, bin, dir, cfg, sock)
	h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: sock, ServerArgs: edge.DefaultHAProxyServerArgs})
	if err != nil {
		t.Fatal(err)
	}
	byLevel := map[int]publication.Origin{1: {Name: "a1", Address: a1.URL, State: "healthy"},
		2: {Name: "b1", Address: b1.URL, State: "healthy"}, 3: {Name: "c1", Address: c1.URL, State: "healthy"}}
	topo := edge.Topology{}
	for level, o := range byLevel {
		topo["www"] = append(topo["www"], edge.LevelOrigin{Name: o.Name, Address: o.Address, State: o.State, Level: level})
	}
	const r, m = "ready", "maint"
	for i, tc := range []struct {
		level int
		want  map[string]string
	}{
		{1, map[string]string{"a1": r, "b1": m, "c1": m, "a1:backup": m, "b1:backup": r, "c1:backup": m}},
		{2, map[string]string{"a1": m, "b1": r, "c1": m, "a1:backup": m, "b1:backup": m, "c1:backup": r}},
		{3, map[string]string{"a1": m, "b1": m, "c1": r, "a1:backup": m, "b1:backup": r, "c1:backup": m}},
		{1, map[string]string{"a1": r, "b1": m, "c1": m, "a1:backup": m, "b1:backup": r, "c1:backup": m}},
	} {
		t.Run(fmt.Sprintf("%d level %d", i+1, tc.level), func(t *testing.T) {
			site := publication.Site{Name: "www", Hostname: hostname, Level: tc.level, Origins: []publication.Origin{byLevel[tc.level]}}
			v, _ := edge.Build(snapshotOf(uint64(i+1), []publication.Site{site}), topo, "", nil)
			if _, err := h.Apply(context.Background(), v); err != nil {
				t.Fatal(err)
			}
			wantStates(t, h, fmt.Sprintf("level %d", tc.level), tc.want)
			if got := serverStates(t, h); len(got) != len(tc.want) {
				t.Errorf("servers %v, want %d", got, len(tc.want))
			}
			waitServing(t, "http://"+listen+"/", []string{byLevel[tc.level].Name})
		})
	}
}

// TestNginxReloadKeepsState: nginx reloaded by someone else (SIGHUP, as
// systemctl reload nginx) under load keeps the state the template wrote:
// the level vigil switched to serves throughout, no GET fails, and
// vigil-node has nothing to re-apply.
func TestNginxReloadKeepsState(t *testing.T) {
	bin := peer(t, "nginx")
	text, err := templates.Get("nginx")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	listen := testnet.Addr(t)
	if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	confPath := filepath.Join(dir, "nginx.conf")
	writeFile(t, confPath, nginxConfig(dir, "1", 1024, "    include "+dir+"/conf.d/*.conf;"))
	cmd := daemon(t, dir, bin, "-p", dir, "-c", confPath, "-e", dir+"/error.log")
	ngx := fmt.Sprintf("%s -p %s -c %s -e %s/error.log", bin, dir, confPath, dir)
	tm, err := edge.NewTemplate(edge.TemplateOptions{Name: "nginx", Files: []edge.File{{Text: text, Dest: filepath.Join(dir, "conf.d", "vigil.conf")}},
		Check: ngx + " -t -q", Reload: fmt.Sprintf("kill -HUP %d", cmd.Process.Pid), MinInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() error {
		if !fileExists(filepath.Join(dir, "nginx.pid")) {
			return errors.New("nginx has not started")
		}
		return nil
	})
	l := newFlakyLevels(t)
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	if err := cp.SetSites(l.topology()); err != nil {
		t.Fatal(err)
	}
	cp.Publish(l.site(2))
	a := startAgentResync(t, cp, 10*time.Minute, map[string]string{"listen": listen}, tm)
	url := "http://" + listen + "/"
	waitServing(t, url, []string{"b1"})
	waitFor(t, func() error {
		if st := a.EdgeStatus()[0]; st.Applied != 1 || st.Err != nil {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ld := startLoad(ctx, url, windowRate, 2)
	t.Cleanup(func() { cancel(); ld.wg.Wait() })
	ld.waitAnswers(t, time.Now(), windowRate/2)
	reloaded := time.Now()
	for range 3 {
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		ld.waitAnswers(t, time.Now(), windowRate/2)
	}
	ld.waitAnswers(t, reloaded, reloadRequests/2)
	cancel()
	total, failed := ld.stop()
	ld.mu.Lock()
	others := 0
	for _, s := range ld.samples {
		if s.err == nil && s.body != "b1" {
			others++
		}
	}
	ld.mu.Unlock()
	t.Logf("EDGE nginx-template reload: 3 SIGHUPs under load: %d of %d GETs failed, %d not from level 2", len(failed), total, others)
	if len(failed) > 0 || others > 0 {
		t.Errorf("%d of %d GETs failed (%v), %d not served by the current level 2", len(failed), total, failed, others)
	}
}

// BenchmarkHAProxyWatchPoll is the cost of one poll of the reload watch
// (show info over a new connection to the stats socket, wall time), and,
// as busy_pct_at_10_per_s, the share of each second that ten polls a
// second (the default -haproxy-watch) spend waiting on it.
func BenchmarkHAProxyWatchPoll(b *testing.B) {
	bin := peer(b, "haproxy")
	dir := b.TempDir()
	sock := filepath.Join(dir, "admin.sock")
	path := filepath.Join(dir, "haproxy.cfg")
	writeFile(b, path, windowHAProxyConfig(sock, testnet.Addr(b)))
	daemon(b, dir, bin, "-W", "-db", "-f", path)
	h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: sock})
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := h.Command(context.Background(), "show info"); err == nil {
			break
		} else if time.Now().After(deadline) {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if _, err := h.Command(context.Background(), "show info"); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start).Seconds() / float64(b.N)
	b.ReportMetric(per*10*100, "busy_pct_at_10_per_s")
}

// oneWorker returns nil when the process pid (nginx's master, with
// worker_processes 1) has exactly one live child: the worker of the last
// reload, the old one gone. It reads /proc; where there is none it
// returns nil.
func oneWorker(pid int) error {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return nil
	}
	var kids []string
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut after
		// its last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[0] == "Z" || f[1] != strconv.Itoa(pid) {
			continue
		}
		kids = append(kids, p)
	}
	if len(kids) != 1 {
		return fmt.Errorf("nginx master %d has %d workers (%v), want 1: the old worker is still there", pid, len(kids), kids)
	}
	return nil
}
