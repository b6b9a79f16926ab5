package edge_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// BenchmarkEdgeCompare sends the same load (b.N GETs from 32 keep-alive
// clients) to the same origin through vigil-node's proxy, HAProxy and nginx,
// one after the other in one run, and reports HAProxy's and nginx's
// throughput and p99 latency as ratios to vigil-node's (a ratio above 1:
// HAProxy or nginx is faster):
//
//	go test -run '^$' -bench EdgeCompare -benchtime 20000x ./plugins/node/edge
//
// The machine's cores are shared by the load, the origin and the proxy, so
// compare the ratios, never the absolute figures. It skips when haproxy or
// nginx is missing (and fails when CI is set).
func BenchmarkEdgeCompare(b *testing.B) {
	haproxyBin, nginxBin := peer(b, "haproxy"), peer(b, "nginx")
	payload := strings.Repeat("x", 1024)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, payload)
	}))
	b.Cleanup(origin.Close)
	originAddr := strings.TrimPrefix(origin.URL, "http://")
	dir := b.TempDir()

	// vigil-node's proxy.
	p, err := proxy.New(proxy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p.SetSnapshot(&publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: hostname, Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: origin.URL, State: "healthy"}}}}})
	front := httptest.NewServer(p)
	b.Cleanup(front.Close)

	haListen, _ := startHAProxyPeer(b, dir, haproxyBin, originAddr)
	ngListen, _ := startNginxPeer(b, dir, nginxBin, originAddr)

	peers := []struct{ name, url string }{{"vigil", front.URL + "/"}, {"haproxy", "http://" + haListen + "/"}, {"nginx", "http://" + ngListen + "/"}}
	for _, pr := range peers {
		waitServing(b, pr.url, []string{payload})
	}
	b.ResetTimer()
	rps := map[string]float64{}
	p99 := map[string]time.Duration{}
	for _, pr := range peers {
		rps[pr.name], p99[pr.name] = measure(b, pr.url, b.N)
	}
	b.StopTimer()
	for _, name := range []string{"haproxy", "nginx"} {
		b.ReportMetric(rps[name]/rps["vigil"], name+"/vigil-rps")
		b.ReportMetric(float64(p99["vigil"])/float64(p99[name]), "vigil/"+name+"-p99")
	}
	b.ReportMetric(rps["vigil"], "vigil-rps")
}

func writeFile(b testing.TB, path, content string) {
	b.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
}

// measure sends n GETs from 32 keep-alive clients and returns the
// throughput and the 99th percentile latency.
func measure(b *testing.B, url string, n int) (float64, time.Duration) {
	const clients = 32
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients, DisableCompression: true}}
	defer client.CloseIdleConnections()
	var left atomic.Int64
	left.Store(int64(n))
	lat := make([][]time.Duration, clients)
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				if _, err := get(client, url); err != nil {
					failed.Add(1)
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if f := failed.Load(); f > 0 {
		b.Errorf("%s: %d of %d requests failed", url, f, n)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	return float64(n) / elapsed.Seconds(), all[len(all)*99/100]
}

// startHAProxyPeer runs HAProxy from bin in dir as a reverse proxy to the
// origin at originAddr (host:port), with upstream connections reused, and
// returns the address it listens on and its process id.
func startHAProxyPeer(b *testing.B, dir, bin, originAddr string) (string, int) {
	listen := testnet.Addr(b)
	cfg := filepath.Join(dir, "haproxy.cfg")
	writeFile(b, cfg, fmt.Sprintf(`global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend fe
    bind %s
    default_backend www
backend www
    http-reuse always
    server a1 %s
`, listen, originAddr))
	name, args := pinned(bin, "-W", "-db", "-f", cfg)
	cmd := daemon(b, dir, name, args...)
	return listen, cmd.Process.Pid
}

// startNginxPeer is startHAProxyPeer for nginx.
func startNginxPeer(b *testing.B, dir, bin, originAddr string) (string, int) {
	listen := testnet.Addr(b)
	cfg := filepath.Join(dir, "nginx.conf")
	writeFile(b, cfg, nginxConfig(dir, "auto", 4096, fmt.Sprintf(`    # The load keeps each connection for a whole round: nginx's default of
    # 1000 requests a connection would close some under it.
    keepalive_requests 1000000;
    upstream www { server %s; keepalive 64; keepalive_requests 1000000; }
    server {
        listen %s;
        location / {
            proxy_pass http://www;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
        }
    }`, originAddr, listen)))
	name, args := pinned(bin, "-p", dir, "-c", cfg, "-e", dir+"/error.log")
	cmd := daemon(b, dir, name, args...)
	return listen, cmd.Process.Pid
}
