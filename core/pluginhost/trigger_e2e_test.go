package pluginhost

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/publication"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// publisher serves one fixed publication as vigil's GET /v1/publication
// does: version 1 to a follower that has less, 304 at the end of the wait
// to one that has it.
func publisher(t *testing.T, snap publication.Snapshot) string {
	t.Helper()
	quit := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/publication" {
			http.NotFound(w, r)
			return
		}
		if after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64); after < snap.Version {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(snap)
			return
		}
		wait, err := time.ParseDuration(r.URL.Query().Get("wait"))
		if err != nil || wait <= 0 || wait > time.Minute {
			wait = 30 * time.Second
		}
		select {
		case <-time.After(wait):
			w.WriteHeader(http.StatusNotModified)
		case <-quit:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		close(quit)
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}

// TestPassiveTriggerThroughRealProcesses: the shipped node gateway runs as
// vigil runs it (a pluginhost Source), a real vigil-node proxies visitors
// to a real origin. When the origin starts failing, OnSuspect is called
// for its site without another round being asked: the node's passive
// report, the gateway's judgement, the plugin protocol's suspect stream
// and the host's bounds, end to end.
func TestPassiveTriggerThroughRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs vigil-source-node and vigil-node")
	}
	dir := t.TempDir()
	for _, cmd := range []string{"vigil-source-node", "vigil-node"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), "github.com/vigilcdn/vigil/plugins/node/cmd/"+cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", cmd, err, out)
		}
	}
	var sick atomic.Bool
	a1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if sick.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = io.WriteString(w, "a1")
	}))
	t.Cleanup(a1.Close)
	cp := publisher(t, publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: a1.URL, State: "healthy"}}}}})

	t.Setenv("VIGIL_NODE_TOKEN", "trigger-test-token")
	gateway, proxy := testnet.Addr(t), testnet.Addr(t)
	suspects := make(chan string, 64)
	logs := &sdktest.LogBuffer{}
	src := New(Spec{
		Name: "node", Plugin: filepath.Join(dir, "vigil-source-node"), Env: []string{"VIGIL_NODE_TOKEN"}, Timeout: 20 * time.Second,
		Config: parseConfig(t, fmt.Sprintf(`
listen        = %q
token_env     = "VIGIL_NODE_TOKEN"
passive_votes = true
`, gateway)),
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs}),
		OnSuspect: func(site string) {
			select {
			case suspects <- site:
			default:
			}
		},
	})
	t.Cleanup(src.Close)
	if diags := src.Start(context.Background()); diags.HasErrors() {
		t.Fatalf("Start: %v\n%s", diags, logs)
	}
	node := exec.Command(filepath.Join(dir, "vigil-node"), "-id", "edge-1", "-gateway", gateway, "-token-env", "VIGIL_NODE_TOKEN",
		"-control-plane", cp, "-state-dir", t.TempDir(), "-proxy-listen", proxy)
	node.Env = []string{"VIGIL_NODE_TOKEN=trigger-test-token"}
	nodeLog := &sdktest.LogBuffer{}
	node.Stdout, node.Stderr = nodeLog, nodeLog
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = node.Process.Kill()
		_ = node.Wait()
		if t.Failed() {
			t.Logf("vigil-node:\n%s\ngateway:\n%s", nodeLog, logs)
		}
	})

	hang := time.Now().Add(2 * time.Minute) // catches a hang only
	ballot := sdk.Ballot{Round: 1, Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: a1.URL, Host: "www.example.com", Path: "/", Timeout: 5 * time.Second}}}
	// Rounds until the node votes: it attached and knows the origin.
	for voted := false; !voted; {
		if time.Now().After(hang) {
			t.Fatal("the node never voted")
		}
		votes, err := src.Vote(context.Background(), ballot)
		if err != nil {
			t.Fatalf("vote: %v", err)
		}
		for _, v := range votes {
			voted = voted || v.Voter == "edge-1" && v.Value == sdk.Up
		}
		if !voted {
			time.Sleep(100 * time.Millisecond)
		}
	}
	calls := src.Stats().Calls

	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	get := func() int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+proxy+"/page", nil)
		req.Host = "www.example.com"
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	// The proxy serves once the publication arrived.
	for ok := 0; ok < 10; {
		if time.Now().After(hang) {
			t.Fatal("the proxy never served the site")
		}
		if get() == http.StatusOK {
			ok++
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	sick.Store(true)
	for range 10 {
		get()
	}
	select {
	case site := <-suspects:
		if site != "www" {
			t.Fatalf("OnSuspect(%q), want www", site)
		}
	case <-time.After(time.Until(hang)):
		t.Fatal("OnSuspect was not called after the real traffic failed")
	}
	if st := src.Stats(); st.Calls != calls || st.Suspects != 1 {
		t.Fatalf("stats %+v: want no Vote since the traffic failed (%d calls) and one suspect", st, calls)
	}
}
