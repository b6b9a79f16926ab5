package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/history"
	"github.com/vigilcdn/vigil/core/simulate"
	"github.com/vigilcdn/vigil/internal/testnet"
)

// TestEndToEndReplayPathPartition records a path partition with the real
// agent, as TestEndToEndPathPartition makes one (two vigil-node agents in
// pops eu and us, the origin refusing the eu node's connections, the
// direct source behind the node source), stops the agent, exports its
// history and replays it: under the recording's configuration the replay
// gives exactly the journal's path_partition_suspected events (each at
// its round, with its group and rounds), and under rounds = 2 the
// suspicion comes one recorded round sooner.
func TestEndToEndReplayPathPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("needs /proc/net/tcp to tell the nodes' connections apart")
	}
	var blocked atomic.Int64 // the pid whose connections are refused; 0 none
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pid := int(blocked.Load()); pid != 0 && socketOwnedBy(r.RemoteAddr, pid) {
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
	write := func(name string, rounds int) string {
		p := filepath.Join(dir, name)
		cfg := fmt.Sprintf(`
control {
  round_interval = "1s"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
  partition {
    label  = "pop"
    rounds = %d
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
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), binDir, rounds, gateway, origin.URL, backup.URL)
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	recording := write("vigil.hcl", 3)
	sooner := write("rounds2.hcl", 2)
	t.Setenv("VIGIL_NODE_TOKEN", "node-secret")
	agent := startAgentProc(t, recording)
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
	nodeUps := func() int {
		o := agent.site(t, "www")["origins"].(map[string]any)["a1"].(map[string]any)
		up := 0
		for _, raw := range o["votes"].([]any) {
			if v := raw.(map[string]any); v["source"] == "node" && v["value"] == "up" {
				up++
			}
		}
		return up
	}
	waitFor(t, "both nodes voting a1 up", 30*time.Second, func() bool { return nodeUps() == 2 })
	round := func() float64 { return agent.site(t, "www")["round"].(float64) }
	nextRound := func(what string) {
		r := round()
		waitFor(t, what, 10*time.Second, func() bool { return round() > r })
	}
	blockedAt := time.Now().Unix()
	blocked.Store(int64(pids["edge-eu"]))
	partitionEvent := func(suspected bool) bool {
		for _, e := range agent.events(t) {
			body := e["event"].(map[string]any)
			if body["kind"] == "path_partition_suspected" && body["suspected"] == suspected && body["group"] == "node/pop=eu" {
				return true
			}
		}
		return false
	}
	waitFor(t, "path_partition_suspected", 30*time.Second, func() bool { return partitionEvent(true) })
	nextRound("a round of the suspicion")
	nextRound("a second round of the suspicion")
	blocked.Store(0)
	waitFor(t, "the suspicion's end", 30*time.Second, func() bool { return partitionEvent(false) })
	nextRound("a round after the end")
	dropped := metric(t, agent, "vigil_history_rounds_dropped_total")
	_ = agent.cmd.Process.Signal(syscall.SIGTERM)
	<-agent.done

	export := filepath.Join(dir, "incident.jsonl")
	run := func(args ...string) string {
		var out bytes.Buffer
		cmd := exec.Command(filepath.Join(binDir, "vigil"), args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("vigil %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	t.Log(run("history", "export", "-config", recording, "-o", export))
	f, err := os.Open(export)
	if err != nil {
		t.Fatal(err)
	}
	x, err := simulate.ReadExport(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if x.Header.Journal != "included" || !x.Header.Partition || x.Header.PartitionLabel != "pop" || x.Header.Version != simulate.ExportVersion {
		t.Fatalf("header %+v: want the journal and the partition data", x.Header)
	}
	var a1 []simulate.ExportPoint
	for _, o := range x.Origins {
		if o.Origin == "a1" {
			a1 = o.Points
		}
	}
	if len(a1) == 0 || a1[0].T > blockedAt {
		t.Fatalf("the history's first round of a1 is after the block (%d rounds kept of the file's %d): the incident is not all in it", len(a1), history.DefaultRounds)
	}
	var journal []simulate.PartitionEvent
	for _, e := range x.Events {
		if ev := e.Event; ev.Kind == decide.KindPathPartitionSuspected {
			journal = append(journal, simulate.PartitionEvent{Time: e.Time.UTC().Truncate(time.Millisecond), Origin: ev.Origin, Group: ev.Group, Rounds: ev.Rounds, Suspected: ev.Suspected})
		}
	}

	load := func(path string) *config.Config {
		cfg, diags := config.Load(path)
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return cfg
	}
	res, err := simulate.Replay(x, load(recording))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sites) != 1 || !res.Partitions {
		t.Fatalf("replay: sites %+v, partitions replayed %v, warnings %q", res.Sites, res.Partitions, res.Warnings)
	}
	s := res.Sites[0]
	if !slices.Equal(s.RecordedPartitions, journal) || len(journal) < 2 {
		t.Fatalf("the recorded column %+v is not the journal's %+v", s.RecordedPartitions, journal)
	}
	if !slices.Equal(s.ReplayedPartitions, journal) {
		t.Fatalf("replayed %+v\nthe journal %+v\n(history batches dropped: %s)", s.ReplayedPartitions, journal, dropped)
	}
	same := run("simulate", "-config", recording, "-history", export)
	t.Logf("the recording's own configuration:\n%s", same)
	if want := fmt.Sprintf("path partitions: as recorded (%d events)", len(journal)); !strings.Contains(same, want) {
		t.Fatalf("vigil simulate -history does not say %q", want)
	}

	// rounds = 2: the first suspicion comes at the recorded round before
	// the one the agent suspected in (its second of eu alone).
	first := journal[0]
	i := slices.IndexFunc(a1, func(p simulate.ExportPoint) bool { return p.At() == first.Time.UnixMilli() })
	if !first.Suspected || i < 1 {
		t.Fatalf("the first journal event %+v is not a suspicion at a recorded round of a1 after its first", first)
	}
	res2, err := simulate.Replay(x, load(sooner))
	if err != nil {
		t.Fatal(err)
	}
	want := simulate.PartitionEvent{Time: time.UnixMilli(a1[i-1].At()).UTC(), Origin: "a1", Group: "node/pop=eu", Rounds: 2, Suspected: true}
	if got := res2.Sites[0].ReplayedPartitions; !slices.Contains(got, want) {
		t.Fatalf("rounds = 2 replayed %+v; want among them %+v", got, want)
	}
	t.Logf("rounds = 2:\n%s", run("simulate", "-config", sooner, "-history", export))
}

// metric is the value of an unlabelled metric of the agent, as text ("?"
// when it is not there).
func metric(t *testing.T, agent *agentProc, name string) string {
	t.Helper()
	resp, err := http.Get(agent.api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body); m != nil {
		return string(m[1])
	}
	return "?"
}

// TestReplayVersion2DataDir: a data_dir whose history.ring is of format
// version 2 (before the partition data; core/history/testdata, written by
// the version 2 writer) still replays with vigil simulate -history DIR:
// its votes through the chain, its switches, and the note that it has no
// partition data. With no state file to name it, the names come from the
// configuration, whose chain names the recorded positions: the votes
// reach the sources at the same positions (the tallies were named by the
// configuration's sources and then looked up by position, and no vote
// was counted, before this test).
func TestReplayVersion2DataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the vigil binary")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	z, err := os.Open(filepath.Join("..", "..", "core", "history", "testdata", "version2.ring.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	zr, err := gzip.NewReader(z)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "history.ring"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
control {
  round_interval = "1s"
  data_dir       = %q
  plugin_dir     = %q
  partition { label = "pop" }
}
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = "http://127.0.0.1:2"
    level   = 2
  }
}
`, data, binDir)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(binDir, "vigil"), "simulate", "-config", cfg, "-history", data)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("vigil simulate -history %s: %v\n%s", data, err, out.String())
	}
	t.Logf("\n%s", out.String())
	for _, want := range []string{
		"replayed 14 rounds, 2026-12-01T10:00:00Z to 2026-12-01T10:00:13Z (votes: through this configuration's chain",
		"warning: no partition data: the recording (its history file is of a version before 3) keeps no voter groups",
		"10:00:09 1 -> 2 failover",
		"10:00:12 2 -> 1 failback",
		"its sources name the recorded chain positions, position for position",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the replay of a version 2 history does not say %q", want)
		}
	}
}
