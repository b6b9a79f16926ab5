package edge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/sdk/publication"
)

const hostname = "www.example.com"

// peer finds an edge binary; without it the test skips, unless CI is set.
func peer(t testing.TB, name string) string {
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

// origin is a loopback origin answering its name.
func origin(t testing.TB, name string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// levels is a site with two levels of loopback origins.
type levels struct {
	byLevel map[int][]publication.Origin
}

func newLevels(t testing.TB) *levels {
	l := &levels{byLevel: map[int][]publication.Origin{}}
	for _, o := range []struct {
		name  string
		level int
	}{{"a1", 1}, {"a2", 1}, {"b1", 2}} {
		srv := origin(t, o.name)
		l.byLevel[o.level] = append(l.byLevel[o.level], publication.Origin{Name: o.name, Address: srv.URL, State: "healthy"})
	}
	return l
}

func (l *levels) site(level int) []publication.Site {
	return []publication.Site{{Name: "www", Hostname: hostname, Level: level, Origins: l.byLevel[level]}}
}

// topology is GET /v1/sites for fakecp.
func (l *levels) topology() []map[string]any {
	origins := map[string]any{}
	for level, list := range l.byLevel {
		for _, o := range list {
			origins[o.Name] = map[string]any{"level": level, "address": o.Address, "state": "healthy"}
		}
	}
	return []map[string]any{{"site": "www", "origins": origins}}
}

func (l *levels) names(level int) []string {
	var out []string
	for _, o := range l.byLevel[level] {
		out = append(out, o.Name)
	}
	return out
}

// startAgent runs a vigil-node agent following cp and driving drivers.
func startAgent(t testing.TB, cp *fakecp.Server, drivers ...edge.Driver) *nodeagent.Agent {
	t.Helper()
	a, err := nodeagent.New(nodeagent.Config{ControlPlane: cp.URL(), Edges: drivers, PollWait: 10 * time.Second,
		Edge: edge.HubOptions{Resync: 2 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond},
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

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// daemon runs a command until the test ends.
func daemon(t testing.TB, dir, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	log, err := os.Create(filepath.Join(dir, filepath.Base(name)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopDaemon(cmd)
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", name, b)
		}
	})
	return cmd
}

// nginxConfig is the nginx.conf of a test's nginx: in the foreground, its
// files in dir, workers worker processes ("auto" or a number) of
// connections connections each, and httpBody inside http { }.
func nginxConfig(dir, workers string, connections int, httpBody string) string {
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	return fmt.Sprintf(`daemon off;
%s
worker_processes %s;
pid %[3]s/nginx.pid;
error_log %[3]s/error.log warn;
events { worker_connections %[4]d; }
http {
    access_log off;
    client_body_temp_path %[3]s/body;
    proxy_temp_path %[3]s/proxy;
    fastcgi_temp_path %[3]s/fastcgi;
    uwsgi_temp_path %[3]s/uwsgi;
    scgi_temp_path %[3]s/scgi;
%[5]s
}
`, user, workers, dir, connections, httpBody)
}

// stopDaemon stops a daemon's process as its init system would: SIGTERM,
// on which nginx and HAProxy stop their workers too, and SIGKILL after 10s.
// A SIGKILL alone left nginx's workers running, orphaned (225 of them after
// an afternoon of benchmarks).
func stopDaemon(cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// get sends one GET with the site's Host.
func get(client *http.Client, url string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Host = hostname
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %.100s", resp.StatusCode, b)
	}
	return string(b), nil
}

// waitServing waits until url serves one of names.
func waitServing(t testing.TB, url string, names []string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	var last string
	var lastErr error
	for time.Now().Before(deadline) {
		body, err := get(client, url)
		if err == nil && slices.Contains(names, body) {
			return
		}
		last, lastErr = body, err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never served %v: last answer %q, %v", url, names, last, lastErr)
}

type sample struct {
	// start is when the GET was sent, end when its answer (or error) came.
	start, end time.Time
	body       string
	err        error
}

// load sends about rps GETs a second to url from workers goroutines until
// ctx ends, and records every answer.
type load struct {
	mu      sync.Mutex
	samples []sample
	wg      sync.WaitGroup
}

func startLoad(ctx context.Context, url string, rps, workers int) *load {
	return startLoadConns(ctx, url, rps, workers, false)
}

// startLoadConns is startLoad; with fresh, every GET opens its own
// connection, as a population of visitors does: each one reaches the
// edge's current worker, never an old worker kept by a keep-alive
// connection across a reload.
func startLoadConns(ctx context.Context, url string, rps, workers int, fresh bool) *load {
	l := &load{}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers, DisableCompression: true, DisableKeepAlives: fresh}}
	every := time.Duration(int64(time.Second) * int64(workers) / int64(rps))
	for i := range workers {
		l.wg.Go(func() {
			// Staggered, so that the requests are spread evenly in time.
			select {
			case <-ctx.Done():
				return
			case <-time.After(every * time.Duration(i) / time.Duration(workers)):
			}
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				sent := time.Now()
				body, err := get(client, url)
				if ctx.Err() != nil && err != nil {
					return
				}
				l.mu.Lock()
				l.samples = append(l.samples, sample{start: sent, end: time.Now(), body: body, err: err})
				l.mu.Unlock()
			}
		})
	}
	return l
}

// firstFrom waits for the first answer after t0 from one of names and
// returns how long after t0 it came.
func (l *load) firstFrom(t testing.TB, t0 time.Time, names []string) time.Duration {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for _, s := range l.samples {
			if s.err == nil && s.end.After(t0) && slices.Contains(names, s.body) {
				l.mu.Unlock()
				return s.end.Sub(t0)
			}
		}
		l.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no answer from %v within 2 minutes of the switch (a hang)", names)
	return 0
}

// waitAnswers waits until n answers ended after t0.
func (l *load) waitAnswers(t testing.TB, t0 time.Time, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l.mu.Lock()
		got := 0
		for _, s := range l.samples {
			if s.end.After(t0) {
				got++
			}
		}
		l.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d answers of %d within 30s", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// slowOrigin is a loopback origin answering its name after delay.
func slowOrigin(t testing.TB, name string, delay time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (l *load) stop() (total int, failed []error) {
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.samples {
		if s.err != nil {
			failed = append(failed, s.err)
		}
	}
	return len(l.samples), failed
}

// switches runs failover and failback n times each under load through url
// and reports the switch times and the failed requests.
func switches(t *testing.T, edgeName, url string, cp *fakecp.Server, l *levels, n int) {
	switchesAt(t, edgeName, url, cp, l, n, 300, 12)
}

// switchesAt is switches under rps GETs a second from workers goroutines.
func switchesAt(t *testing.T, edgeName, url string, cp *fakecp.Server, l *levels, n, rps, workers int) {
	waitServing(t, url, l.names(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*16*time.Second+10*time.Second)
	defer cancel()
	ld := startLoad(ctx, url, rps, workers)
	time.Sleep(300 * time.Millisecond)
	var over, back []time.Duration
	for range n {
		for _, to := range []int{2, 1} {
			t0 := time.Now()
			cp.Publish(l.site(to))
			d := ld.firstFrom(t, t0, l.names(to))
			if to == 2 {
				over = append(over, d)
			} else {
				back = append(back, d)
			}
			time.Sleep(1200 * time.Millisecond) // past any reload's minimum interval
		}
	}
	cancel()
	total, failed := ld.stop()
	all := append(slices.Clone(over), back...)
	slices.Sort(all)
	t.Logf("EDGE %s: %d switches (%d failovers, %d failbacks): first answer from the new level after p50 %s, max %s; failover %v, failback %v; %d of %d GETs failed",
		edgeName, len(all), len(over), len(back), all[len(all)/2].Round(10*time.Microsecond), all[len(all)-1].Round(10*time.Microsecond), rounded(over), rounded(back), len(failed), total)
	if len(failed) > 0 {
		t.Logf("first failure: %v", failed[0])
	}
	if total < rps {
		t.Errorf("only %d requests were sent: the load loop is starved", total)
	}
	report(edgeName, all, len(failed), total)
}

func rounded(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Microsecond).String()
	}
	return out
}

// report appends the figures to $VIGIL_EDGE_REPORT when it is set.
func report(edgeName string, all []time.Duration, failed, total int) {
	path := os.Getenv("VIGIL_EDGE_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\tswitches=%d\tp50=%s\tmax=%s\tfailed=%d/%d\n", edgeName, len(all), all[len(all)/2], all[len(all)-1], failed, total)
}

func snapshotOf(version uint64, sites []publication.Site) *publication.Snapshot {
	return &publication.Snapshot{Version: version, Sites: sites}
}

// startAgentVars is startAgent with template variables.
func startAgentVars(t testing.TB, cp *fakecp.Server, vars map[string]string, drivers ...edge.Driver) (*nodeagent.Agent, error) {
	t.Helper()
	a, err := nodeagent.New(nodeagent.Config{ControlPlane: cp.URL(), Edges: drivers, PollWait: 10 * time.Second,
		Edge: edge.HubOptions{Vars: vars, Resync: 2 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond},
		Log:  hclog.New(&hclog.LoggerOptions{Level: logLevel(), Output: testWriter{t}})})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return a, nil
}

// logLevel is warn, or VIGIL_TEST_LOG (debug, info...).
func logLevel() hclog.Level {
	if l := os.Getenv("VIGIL_TEST_LOG"); l != "" {
		return hclog.LevelFromString(l)
	}
	return hclog.Warn
}
