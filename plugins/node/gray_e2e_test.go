package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
)

// TestGrayFailureFailsOverOnce: a gray failure (the origin's health path
// answers 200, every other path 500) on a site's only level-1 origin, with
// the node source's recommended setup (passive_votes, nodes_per_round = 1
// and min_votes = 3 with two proxying nodes, direct after node), real
// processes throughout: the vigil agent with its plugins, two vigil-node
// agents proxying visitor GETs at a bounded rate. Over 60 rounds of broken
// real traffic the journal shows exactly one failover and no failback (and
// no failback_available with failback = "manual"): the nodes hold the
// failed origin's passive window and their canaries keep failing. When the
// origin truly recovers, the canaries clear the windows and the site fails
// back (or, manual, is announced as able to). A third run has the origin's
// / answer too: the canaries ask for the path the visitors failed on, so
// that does not clear the windows early.
func TestGrayFailureFailsOverOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	bin := grayBinaries(t,
		"github.com/vigilcdn/vigil/cmd/vigil",
		"github.com/vigilcdn/vigil/plugins/direct/cmd/vigil-source-direct",
		"github.com/vigilcdn/vigil/plugins/node/cmd/vigil-source-node",
		"github.com/vigilcdn/vigil/plugins/node/cmd/vigil-node")
	for _, tc := range []struct {
		name, failback string
		rootOK         bool // / answers too: only the visitors' paths fail
	}{
		{"auto", "auto", false},
		{"manual", "manual", false},
		// The canaries ask for the path the visitors failed on, not /.
		{"auto, / answers", "auto", true},
	} {
		t.Run(tc.name, func(t *testing.T) { runGray(t, bin, tc.failback, tc.rootOK) })
	}
}

// brokenRounds is how many rounds of the site the real traffic stays
// broken: 60 s at round_interval 1s.
const brokenRounds = 60

func runGray(t *testing.T, bin, failback string, rootOK bool) {
	var sick atomic.Bool
	a1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cdn-health" && (r.URL.Path != "/" || !rootOK) && sick.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "a1")
	}))
	t.Cleanup(a1.Close)
	b1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "b1") }))
	t.Cleanup(b1.Close)

	dir := t.TempDir()
	gateway := testnet.Addr(t)
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = "1s"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 3
  timeout   = "3s"
  env       = ["VIGIL_NODE_TOKEN"]
  config {
    listen          = %q
    token_env       = "VIGIL_NODE_TOKEN"
    online_timeout  = "3s"
    nodes_per_round = 1
    passive_votes   = true
  }
}
source "direct" {
  plugin  = "vigil-source-direct"
  timeout = "3s"
}
site "www" {
  hostname = "www.example.com"
  failback = %q
  health_check {
    path                = "/cdn-health"
    timeout             = "500ms"
    unhealthy_threshold = 3
    healthy_threshold   = 2
  }
  origin "a1" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), bin, gateway, failback, a1.URL, b1.URL)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"VIGIL_TOKEN=gray-api-token", "VIGIL_NODE_TOKEN=gray-node-token"}
	cp := startGrayVigil(t, filepath.Join(bin, "vigil"), config, env)

	var proxies []string
	for _, id := range []string{"edge-1", "edge-2"} {
		listen := testnet.Addr(t)
		proxies = append(proxies, "http://"+listen)
		p := startNodeProcess(t, filepath.Join(bin, "vigil-node"), env, "-id", id, "-gateway", gateway, "-token-env", "VIGIL_NODE_TOKEN",
			"-control-plane", cp.api, "-control-plane-token-env", "VIGIL_TOKEN", "-proxy-listen", listen, "-canary-interval", "2s")
		t.Cleanup(func() {
			if t.Failed() {
				p.mu.Lock()
				t.Logf("%s log:\n%s", id, strings.Join(p.lines, "\n"))
				p.mu.Unlock()
			}
		})
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	t.Cleanup(client.CloseIdleConnections)
	get := func(base string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+"/page", nil)
		req.Host = "www.example.com"
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	hang := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute) // catches a hang only
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("no %s after 3 minutes", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	hang("healthy level 1 served by both proxies", func() bool {
		if cp.site(t).Levels["1"] != "healthy" {
			return false
		}
		for _, p := range proxies {
			if code, body := get(p); code != 200 || body != "a1" {
				return false
			}
		}
		return true
	})
	before := cp.lastSeq(t)

	// Visitors: a GET every 50 ms, alternately through each proxy, until
	// the test ends.
	var sent, failed atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if code, _ := get(proxies[i%len(proxies)]); code != 200 {
				failed.Add(1)
			}
			sent.Add(1)
		}
	})

	// The real paths break for brokenRounds rounds of the site.
	sick.Store(true)
	broke := cp.site(t).Round
	hang(fmt.Sprintf("%d rounds of broken traffic", brokenRounds), func() bool { return cp.site(t).Round >= broke+brokenRounds })
	brokenSent, brokenFailed := sent.Load(), failed.Load()
	events := cp.events(t, before)
	view := cp.site(t)
	t.Logf("%d rounds of broken real traffic: %d visitor GETs, %d not 200; events: %s", brokenRounds, brokenSent, brokenFailed, grayKinds(events))
	if n := grayCount(events, "level_switched", "failover"); n != 1 {
		t.Errorf("%d failovers in %d rounds of broken traffic, want exactly 1", n, brokenRounds)
	}
	if n := grayCount(events, "level_switched", "failback"); n != 0 {
		t.Errorf("%d failbacks while every real request to level 1 fails, want none", n)
	}
	if n := grayCount(events, "failback_available", ""); n != 0 {
		t.Errorf("%d failback_available notices while every real request to level 1 fails, want none", n)
	}
	if view.Level != 2 || view.Levels["1"] != "unhealthy" {
		t.Errorf("after the broken rounds: on level %d, level 1 %s; want level 2, level 1 unhealthy", view.Level, view.Levels["1"])
	}
	downs := 0
	for _, v := range view.Origins["a1"].Votes {
		if strings.HasSuffix(v.Voter, PassiveSuffix) && v.Value == "down" {
			downs++
		}
	}
	if downs != 2 {
		t.Errorf("a1's last votes %+v: want both nodes' passive votes down (held windows)", view.Origins["a1"].Votes)
	}

	// The origin truly recovers.
	sick.Store(false)
	healed := cp.site(t).Round
	switch failback {
	case "auto":
		var back grayEvent
		hang("failback", func() bool {
			for _, e := range cp.events(t, before) {
				if e.Event.Kind == "level_switched" && e.Event.Reason == "failback" && e.Round >= healed {
					back = e
					return true
				}
			}
			return false
		})
		t.Logf("recovered at round %d, failed back at round %d", healed, back.Round)
		hang("both proxies serving level 1 again", func() bool {
			for _, p := range proxies {
				if code, body := get(p); code != 200 || body != "a1" {
					return false
				}
			}
			return true
		})
	case "manual":
		var notice grayEvent
		hang("failback_available", func() bool {
			for _, e := range cp.events(t, before) {
				if e.Event.Kind == "failback_available" && e.Round >= healed {
					notice = e
					return true
				}
			}
			return false
		})
		t.Logf("recovered at round %d, failback_available at round %d", healed, notice.Round)
		if notice.Event.Level != 1 {
			t.Errorf("failback_available for level %d, want 1", notice.Event.Level)
		}
	}
	events = cp.events(t, before)
	if n := grayCount(events, "level_switched", "failover"); n != 1 {
		t.Errorf("%d failovers in all, want 1: %s", n, grayKinds(events))
	}
}

// grayBinaries builds pkgs into one directory, which it returns.
func grayBinaries(t *testing.T, pkgs ...string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// grayVigil is a `vigil agent` subprocess; api is its API's URL.
type grayVigil struct {
	api    string
	token  string
	client *http.Client
}

// startGrayVigil starts `vigil agent` with config and env (NAME=value) and
// waits for its API.
func startGrayVigil(t *testing.T, bin, config string, env []string) *grayVigil {
	t.Helper()
	listenFile := filepath.Join(t.TempDir(), "listen")
	cmd := exec.Command(bin, "agent", "-config", config, "-listen-file", listenFile)
	cmd.Env = env
	var log grayLog
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("vigil agent log:\n%s", log.String())
		}
	})
	deadline := time.After(time.Minute)
	for {
		if b, err := os.ReadFile(listenFile); err == nil {
			p := &grayVigil{api: strings.TrimSpace(string(b)), client: &http.Client{Timeout: 10 * time.Second}}
			for _, kv := range env {
				if v, ok := strings.CutPrefix(kv, "VIGIL_TOKEN="); ok {
					p.token = v
				}
			}
			t.Cleanup(p.client.CloseIdleConnections)
			return p
		}
		select {
		case <-exited:
			t.Fatalf("vigil agent exited before it started:\n%s", log.String())
		case <-deadline:
			t.Fatalf("vigil agent did not start in a minute:\n%s", log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *grayVigil) get(t *testing.T, path string, out any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.api+path, nil)
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// graySite is what the test reads of GET /v1/sites/www.
type graySite struct {
	Round   uint64            `json:"round"`
	Level   int               `json:"level"`
	Levels  map[string]string `json:"levels"`
	Origins map[string]struct {
		Votes []struct {
			Voter string `json:"voter"`
			Value string `json:"value"`
		} `json:"votes"`
	} `json:"origins"`
}

func (p *grayVigil) site(t *testing.T) graySite {
	t.Helper()
	var v graySite
	p.get(t, "/v1/sites/www", &v)
	return v
}

// grayEvent is one event of GET /v1/events.
type grayEvent struct {
	Seq   uint64 `json:"seq"`
	Round uint64 `json:"round"`
	Event struct {
		Kind   string `json:"kind"`
		Reason string `json:"reason"`
		Level  int    `json:"level"`
		From   any    `json:"from"`
		To     any    `json:"to"`
	} `json:"event"`
}

// events returns site www's journal after seq.
func (p *grayVigil) events(t *testing.T, after uint64) []grayEvent {
	t.Helper()
	var page struct {
		Events []grayEvent `json:"events"`
	}
	p.get(t, fmt.Sprintf("/v1/events?site=www&limit=10000&after=%d", after), &page)
	return page.Events
}

// lastSeq is the sequence number of site www's last event (0: none).
func (p *grayVigil) lastSeq(t *testing.T) uint64 {
	t.Helper()
	seq := uint64(0)
	for _, e := range p.events(t, 0) {
		seq = max(seq, e.Seq)
	}
	return seq
}

// grayCount counts the events of kind (and, when not empty, reason).
func grayCount(events []grayEvent, kind, reason string) int {
	n := 0
	for _, e := range events {
		if e.Event.Kind == kind && (reason == "" || e.Event.Reason == reason) {
			n++
		}
	}
	return n
}

// grayKinds lists the events as kind(reason)@round.
func grayKinds(events []grayEvent) string {
	var out []string
	for _, e := range events {
		s := e.Event.Kind
		if e.Event.Reason != "" {
			s += "(" + e.Event.Reason + ")"
		}
		out = append(out, fmt.Sprintf("%s@%d %v->%v", s, e.Round, e.Event.From, e.Event.To))
	}
	return strings.Join(out, ", ")
}

// grayLog is a strings.Builder safe for a process's stderr copier
// and the test reading it.
type grayLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *grayLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *grayLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
