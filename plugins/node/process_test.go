package node

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// nodeProcess is a vigil-node subprocess whose log lines can be awaited.
type nodeProcess struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	grew  chan struct{}
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
	timeout := time.After(20 * time.Second)
	for i := 0; ; {
		p.mu.Lock()
		lines, grew := p.lines, p.grew
		p.mu.Unlock()
		for ; i < len(lines); i++ {
			if strings.Contains(lines[i], s) {
				return lines[i]
			}
		}
		select {
		case <-grew:
		case <-timeout:
			t.Fatalf("no log line with %q within 20s; log:\n%s", s, strings.Join(lines, "\n"))
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
