package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// TestNodeMetricsIncludeTheProxyAndPassPromtool: vigil-node's
// -metrics-listen serves the edge proxy's request series beside the
// agent's own, and the page passes promtool check metrics.
func TestNodeMetricsIncludeTheProxyAndPassPromtool(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") }))
	t.Cleanup(origin.Close)
	snap := publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: origin.URL, State: "healthy"}}}}}
	cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("after") != "0" {
			w.WriteHeader(http.StatusNotModified) // nothing newer
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(snap)
	}))
	t.Cleanup(cp.Close)
	a, err := New(Config{ID: "edge-1", ControlPlane: cp.URL, PollWait: 50 * time.Millisecond, ProxyListen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.After(time.Minute)
	for a.ProxyAddr() == nil || a.MetricsAddr() == nil {
		select {
		case err := <-done:
			t.Fatalf("Run ended: %v", err)
		case <-deadline:
			t.Fatal("the node's listeners did not open in 10s")
		case <-time.After(5 * time.Millisecond):
		}
	}
	// Visitors, until the publication has reached the proxy.
	for served := false; !served; {
		req, _ := http.NewRequest("GET", "http://"+a.ProxyAddr().String()+"/", nil)
		req.Host = "www.example.com"
		if resp, err := http.DefaultClient.Do(req); err == nil {
			served = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		select {
		case <-deadline:
			t.Fatal("the proxy never served the published origin")
		case <-time.After(5 * time.Millisecond):
		}
	}
	resp, err := http.Get("http://" + a.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `vigil_node_proxy_requests_total{code="2xx",site="www"}`) {
		t.Fatalf("the node's /metrics has no proxy request series:\n%s", body)
	}
	// OpenMetrics on request, as the agent's /metrics (promtool checks
	// the text format; core/agent's test checks the OpenMetrics page).
	req, _ := http.NewRequest("GET", "http://"+a.MetricsAddr().String()+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
	omResp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	om, _ := io.ReadAll(omResp.Body)
	omResp.Body.Close()
	if ct := omResp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") || !strings.HasSuffix(string(om), "# EOF\n") ||
		!strings.Contains(string(om), "# TYPE vigil_node_proxy_requests counter\n") {
		t.Errorf("asked for OpenMetrics, got %s:\n%.400s", ct, om)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not installed (Debian's prometheus package; make deps installs it)")
		}
		t.Skip("promtool not installed (make deps installs Debian's prometheus)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
