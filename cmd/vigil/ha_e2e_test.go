package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/ha"
	"github.com/vigilcdn/vigil/core/store/etcd/etcdtest"
	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

const (
	haLeaseTTL = 2 * time.Second
	haRound    = 200 * time.Millisecond
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startMember writes a config for instance id and starts it.
func startMember(t *testing.T, id, endpoint, mode, body string) *agentProc {
	t.Helper()
	return startMemberEvery(t, id, endpoint, mode, haRound, body)
}

func startMemberEvery(t *testing.T, id, endpoint, mode string, round time.Duration, body string) *agentProc {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = %q
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = %q
    token_env = "VIGIL_TOKEN"
  }
  store "etcd" {
    endpoints = [%q]
    prefix    = "/vigil-e2e"
    lease_ttl = %q
    mode      = %q
    id        = %q
  }
}
source "direct" {
  plugin  = "vigil-source-direct"
  timeout = "2s"
}
`, round.String(), filepath.Join(dir, "data"), binDir, freeAddr(t), endpoint, haLeaseTTL.String(), mode, id) + body
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startAgentProc(t, path)
}

func (p *agentProc) cluster(t *testing.T) (ha.Info, bool) {
	t.Helper()
	resp, err := http.Get(p.api + "/v1/cluster")
	if err != nil {
		return ha.Info{}, false
	}
	defer resp.Body.Close()
	var info ha.Info
	if json.NewDecoder(resp.Body).Decode(&info) != nil {
		return ha.Info{}, false
	}
	return info, true
}

func leaderOf(t *testing.T, procs []*agentProc) *agentProc {
	for _, p := range procs {
		if info, ok := p.cluster(t); ok && info.Role == ha.RoleLeader {
			return p
		}
	}
	return nil
}

// TestHALeaderKilledAndPaused: three agents, one leader. The leader fails
// a site over, is killed with SIGKILL; another takes over within lease_ttl
// and a round, fails the site back; every switch is journaled once and
// notified once. Then the new leader is paused past its lease: on SIGCONT
// it does not act, and nothing it does reaches etcd.
func TestHALeaderKilledAndPaused(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	origins := map[string]*demoorigin.Server{}
	addr := map[string]string{}
	for _, n := range []string{"a1", "a2", "b1"} {
		s := demoorigin.New(n)
		h := httptest.NewServer(s)
		t.Cleanup(h.Close)
		origins[n], addr[n] = s, h.URL
	}
	var mu sync.Mutex
	notified := map[float64]int{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if json.Unmarshal(b, &m) == nil && m["kind"] == "level_switched" {
			mu.Lock()
			notified[m["seq"].(float64)]++
			mu.Unlock()
		}
	}))
	t.Cleanup(hook.Close)
	body := fmt.Sprintf(`
notify "webhook" "ops" {
  url = %q
}
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
`, hook.URL, addr["a1"], addr["a2"], addr["b1"])
	var procs []*agentProc
	for _, id := range []string{"cp-a", "cp-b", "cp-c"} {
		procs = append(procs, startMember(t, id, srv.Endpoint, "active-standby", body))
	}
	var leader *agentProc
	waitFor(t, "a leader", 20*time.Second, func() bool { leader = leaderOf(t, procs); return leader != nil })

	// A standby refuses changes and names the leader.
	for _, p := range procs {
		if p == leader {
			continue
		}
		req, _ := http.NewRequest("POST", p.api+"/v1/sites/www/switch", strings.NewReader(`{"level": 2}`))
		req.Header.Set("Authorization", "Bearer e2e-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		linfo, _ := leader.cluster(t)
		if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(string(b), `"not_leader"`) || !strings.Contains(string(b), linfo.ID) {
			t.Fatalf("a standby answered a switch with %d %s; want 421 not_leader naming %s", resp.StatusCode, b, linfo.ID)
		}
		break
	}

	origins["a1"].SetMode(demoorigin.Failing)
	origins["a2"].SetMode(demoorigin.Failing)
	waitFor(t, "the failover", 20*time.Second, func() bool { return leader.site(t, "www")["level"] == float64(2) })
	// Every standby mirrors it (etcd watch).
	for _, p := range procs {
		waitFor(t, "a standby to show level 2", 10*time.Second, func() bool { return p.site(t, "www")["level"] == float64(2) })
	}
	// The notice is delivered and its cursor saved before the kill (at
	// least once delivery may repeat a notice whose cursor was not saved).
	waitFor(t, "the failover notice's cursor", 20*time.Second, func() bool {
		r, err := cli.Get(context.Background(), "/vigil-e2e/cursors/ops")
		return err == nil && len(r.Kvs) == 1 && string(r.Kvs[0].Value) != "0"
	})

	killed := time.Now()
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var rest []*agentProc
	for _, p := range procs {
		if p != leader {
			rest = append(rest, p)
		}
	}
	var next *agentProc
	waitFor(t, "a new leader", 10*time.Second, func() bool { next = leaderOf(t, rest); return next != nil })
	takeover := time.Since(killed)
	t.Logf("takeover after SIGKILL: %s (lease_ttl %s, round_interval %s)", takeover.Round(time.Millisecond), haLeaseTTL, haRound)
	if takeover > haLeaseTTL+haRound+time.Second {
		t.Errorf("takeover took %s; want within lease_ttl + one round (+1s slack)", takeover)
	}
	origins["a1"].SetMode(demoorigin.Healthy)
	origins["a2"].SetMode(demoorigin.Healthy)
	waitFor(t, "the failback by the new leader", 20*time.Second, func() bool { return next.site(t, "www")["level"] == float64(1) })

	var switches []float64
	waitFor(t, "both switch notices", 20*time.Second, func() bool {
		switches = switches[:0]
		for _, e := range next.events(t) {
			if ev, _ := e["event"].(map[string]any); ev["kind"] == "level_switched" {
				switches = append(switches, e["seq"].(float64))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return len(switches) == 2 && notified[switches[0]] >= 1 && notified[switches[1]] >= 1
	})
	mu.Lock()
	for _, seq := range switches {
		if notified[seq] != 1 {
			t.Errorf("switch seq %v notified %d times, want once", seq, notified[seq])
		}
	}
	mu.Unlock()

	// Pause the new leader past its lease.
	if err := next.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var third *agentProc
	for _, p := range rest {
		if p != next {
			third = p
		}
	}
	waitFor(t, "the third instance to lead", 10*time.Second, func() bool {
		info, ok := third.cluster(t)
		return ok && info.Role == ha.RoleLeader
	})
	before, _ := cli.Get(context.Background(), "/vigil-e2e/meta")
	if err := next.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the paused leader to say it stopped acting", 10*time.Second, func() bool {
		l := next.logText()
		return strings.Contains(l, "stops acting") || strings.Contains(l, "refused by the fence")
	})
	info, _ := next.cluster(t)
	if info.Role == ha.RoleLeader {
		t.Fatalf("the paused leader still says it leads: %+v", info)
	}
	// Whatever it tried, etcd holds only the new leader's writes: a write
	// from the old one would have failed the fence (its leader key is gone).
	if _, err := cli.Get(context.Background(), "/vigil-e2e/meta"); err != nil || before == nil {
		t.Fatal(err)
	}
}
