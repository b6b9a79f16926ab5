package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// versionLog is what a follower saw: each publication version and the
// content it named.
type versionLog struct {
	mu       sync.Mutex
	contents map[uint64]string
	clash    []string
	last     *publication.Snapshot
}

func digest(s *publication.Snapshot) string {
	b, _ := json.Marshal(s.Sites)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func (l *versionLog) saw(s *publication.Snapshot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := digest(s)
	if prev, ok := l.contents[s.Version]; ok && prev != d {
		l.clash = append(l.clash, fmt.Sprintf("version %d named content %s, then %s", s.Version, prev, d))
	}
	l.contents[s.Version] = d
	l.last = s
}

// follow long-polls the publication like a node does, across restarts of
// the agent, until ctx ends.
func follow(ctx context.Context, api func() string, l *versionLog) {
	var after uint64
	for ctx.Err() == nil {
		f := publication.Follower{BaseURL: api(), Wait: 2 * time.Second}
		snap, err := f.Next(ctx, after)
		switch {
		case errors.Is(err, publication.ErrNotModified):
		case err != nil:
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		default:
			l.saw(snap)
			after = snap.Version
		}
	}
}

// TestKill9InsideTheCommitWindows kills the agent (SIGKILL, from the
// engine's own commit hooks, so the window is hit every time) right before
// and right after a commit, again and again while sites switch, with a
// follower and a real vigil-node following the publication. Nothing may
// leave the process before it is saved: no publication version may ever
// name two contents, the journal must stay contiguous, and the node ends
// on what the control plane publishes.
func TestKill9InsideTheCommitWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	faultBin := filepath.Join(binDir, "fault", "vigil")
	origins := map[string]*demoorigin.Server{}
	addr := map[string]string{}
	for _, n := range []string{"a1", "a2", "b1"} {
		s := demoorigin.New(n)
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		origins[n], addr[n] = s, srv.URL
	}
	dir := t.TempDir()
	listen := testnet.Addr(t)
	config := filepath.Join(dir, "vigil.hcl")
	var sites string
	for _, name := range []string{"www", "api", "img"} {
		sites += fmt.Sprintf(`
site %q {
  hostname = "%s.example.com"
  health_check {
    path                = "/cdn-health"
    timeout             = "300ms"
    unhealthy_threshold = 1
    healthy_threshold   = 1
  }
  origin "a1" { address = %q }
  origin "a2" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}`, name, name, addr["a1"], addr["a2"], addr["b1"])
	}
	cfg := fmt.Sprintf(`
control {
  round_interval = "150ms"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = %q
    token_env = "VIGIL_TOKEN"
  }
}
source "direct" {
  plugin  = "vigil-source-direct"
  timeout = "1s"
}
%s
`, filepath.Join(dir, "data"), binDir, listen, sites)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	api := "http://" + listen

	ctx, cancel := context.WithCancel(context.Background())
	var vl versionLog
	vl.contents = map[uint64]string{}
	var wg sync.WaitGroup
	wg.Go(func() { follow(ctx, func() string { return api }, &vl) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	nodeDir := t.TempDir()
	node := exec.Command(filepath.Join(binDir, "vigil-node"), "-control-plane", api, "-state-dir", nodeDir)
	node.Stderr = os.Stderr
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Process.Kill(); _ = node.Wait() })

	flip := func(failing bool) {
		mode := demoorigin.Healthy
		if failing {
			mode = demoorigin.Failing
		}
		origins["a1"].SetMode(mode)
		origins["a2"].SetMode(mode)
	}
	kills := 0
	for cycle, window := range []string{"before-commit:4", "after-commit:4", "before-commit:7", "after-commit:7", "before-commit:5", "after-commit:9"} {
		// Every cycle flips the primaries, so the rounds around the kill
		// switch levels and republish.
		flip(cycle%2 == 0)
		p := startAgentBin(t, faultBin, config, "VIGIL_FAULT="+window)
		select {
		case <-p.done:
		case <-time.After(hangGuard(30 * time.Second)):
			t.Fatalf("cycle %d: the agent was not killed at %s within %s:\n%s", cycle, window, hangGuard(30*time.Second), p.logText())
		}
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("cycle %d: the agent ended with %v, not by SIGKILL at %s:\n%s", cycle, p.cmd.ProcessState, window, p.logText())
		}
		kills++
	}

	// A last, normal run settles every site.
	flip(false)
	p := startAgentProc(t, config)
	waitFor(t, "every site back on level 1", 30*time.Second, func() bool {
		for _, name := range []string{"www", "api", "img"} {
			if p.site(t, name)["level"].(float64) != 1 {
				return false
			}
		}
		return true
	})
	final := publicationNow(t, api)
	waitFor(t, "the follower to reach the final publication", 20*time.Second, func() bool {
		vl.mu.Lock()
		defer vl.mu.Unlock()
		return vl.last != nil && vl.last.Version == final.Version
	})
	waitFor(t, "the node to save the final publication", 20*time.Second, func() bool {
		snap, err := nodeagent.LoadSnapshot(nodeDir)
		return err == nil && snap != nil && snap.Version == final.Version && digest(snap) == digest(final)
	})

	vl.mu.Lock()
	clash, versions := vl.clash, len(vl.contents)
	vl.mu.Unlock()
	if len(clash) > 0 {
		t.Fatalf("after %d kills, publication versions named other content after a crash:\n%v", kills, clash)
	}
	if versions < kills {
		t.Errorf("the follower saw only %d versions over %d crash cycles of switching: the test did not exercise the publication", versions, kills)
	}
	evs := p.events(t)
	seqs := make([]float64, len(evs))
	for i, e := range evs {
		seqs[i] = e["seq"].(float64)
	}
	if !sort.Float64sAreSorted(seqs) {
		t.Fatalf("journal out of order: %v", seqs)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("journal has a gap or a repeat between %v and %v after the crashes", seqs[i-1], seqs[i])
		}
	}
	switches := 0
	for _, e := range evs {
		if e["event"].(map[string]any)["kind"] == "level_switched" {
			switches++
		}
	}
	if switches < 3 {
		t.Errorf("only %d level switches journaled over %d cycles of failing and recovering primaries", switches, kills)
	}
}

func publicationNow(t *testing.T, api string) *publication.Snapshot {
	t.Helper()
	f := publication.Follower{BaseURL: api, Wait: time.Second}
	snap, err := f.Next(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}
