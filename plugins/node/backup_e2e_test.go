package node

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	"github.com/vigilcdn/vigil/sdk/publication"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// breakable is a loopback origin that answers 200 until it breaks: then
// it answers 503, or (refuse) closes its listener, so that connections to
// it are refused (its port stays reserved by testnet until the test ends).
type breakable struct {
	url    string
	srv    *http.Server
	broken atomic.Bool
	hits   atomic.Int64
}

func breakableOrigin(t *testing.T, name string) *breakable {
	t.Helper()
	addr := testnet.Addr(t)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b := &breakable{url: "http://" + addr}
	b.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b.hits.Add(1)
		if b.broken.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, name)
	})}
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() { _ = b.srv.Close() })
	return b
}

func (b *breakable) breakDown(refuse bool) {
	if refuse {
		_ = b.srv.Close()
		return
	}
	b.broken.Store(true)
}

// metricValue reads one sample of a Prometheus text exposition at url
// (the series named exactly series, labels included), or -1.
func metricValue(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	return -1
}

// TestBackupDuringDetectionWindow: a real vigil-node process follows a
// test control plane publishing site www at level 1 (a1, a2) with level 2
// (b1) as its Backup. Level 1 breaks (its origins answer 503, or refuse
// connections) and, before the control plane switches, 1,000 GETs paced at
// about 50 a second go through vigil-node's proxy: at most 1% may fail
// (with no backup every one of them would: level 1 has no working
// origin). The backup's answers are counted on /metrics and logged; the
// control plane's switch to level 2 then serves every request. Nothing
// here measures time: the pacing only spreads the requests over two of
// the proxy's skip periods (10s), as a real detection window (60-95s)
// spreads them over more.
func TestBackupDuringDetectionWindow(t *testing.T) {
	bin := sdktest.Build(t, "./cmd/vigil-node")
	for _, refuse := range []bool{false, true} {
		name := "503"
		if refuse {
			name = "refused"
		}
		t.Run(name, func(t *testing.T) {
			a1, a2 := breakableOrigin(t, "a1"), breakableOrigin(t, "a2")
			b1 := countedOrigin(t, "b1")
			level1 := []publication.Origin{{Name: "a1", Address: a1.url, State: "healthy"}, {Name: "a2", Address: a2.url, State: "healthy"}}
			level2 := []publication.Origin{{Name: "b1", Address: b1.url, State: "healthy"}}
			cp := fakecp.New()
			t.Cleanup(cp.Close)
			v := cp.Publish([]publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1, Origins: level1,
				Backup: &publication.Backup{Level: 2, Origins: level2}}})
			listen, metrics := testnet.Addr(t), testnet.Addr(t)
			p := startNodeProcess(t, bin, nil, "-control-plane", cp.URL(), "-state-dir", t.TempDir(),
				"-proxy-listen", listen, "-metrics-listen", metrics)
			p.awaitLine(t, fmt.Sprintf("publication applied: version=%d", v))

			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: time.Minute}
			t.Cleanup(client.CloseIdleConnections)
			get := func() (int, string) {
				req, _ := http.NewRequest(http.MethodGet, "http://"+listen+"/", nil)
				req.Host = "www.example.com"
				resp, err := client.Do(req)
				if err != nil {
					return 0, err.Error()
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				return resp.StatusCode, string(body)
			}

			// Level 1 works: the backup gets nothing.
			for range 20 {
				if code, body := get(); code != http.StatusOK || body == "b1" {
					t.Fatalf("level 1 working: %d %q", code, body)
				}
			}
			if b1.hits.Load() != 0 {
				t.Fatalf("the backup answered %d requests while level 1 worked", b1.hits.Load())
			}

			// Level 1 breaks; the control plane has not switched yet.
			a1.breakDown(refuse)
			a2.breakDown(refuse)
			const n = 1000
			failed := 0
			var firstFailures []string
			tick := time.NewTicker(20 * time.Millisecond) // about 50 requests a second
			defer tick.Stop()
			for range n {
				<-tick.C
				if code, body := get(); code != http.StatusOK {
					failed++
					if len(firstFailures) < 5 {
						firstFailures = append(firstFailures, fmt.Sprintf("%d %.80q", code, body))
					}
				}
			}
			served := b1.hits.Load()
			t.Logf("level 1 %s: %d of %d GETs failed (%.2f%%), the backup answered %d; a1 got %d attempts, a2 %d; first failures %v",
				name, failed, n, 100*float64(failed)/n, served, a1.hits.Load(), a2.hits.Load(), firstFailures)
			if failed > n/100 {
				t.Errorf("%d of %d GETs failed before the switch, want at most 1%% (%d)", failed, n, n/100)
			}
			if served < n-int64(failed)-20 {
				t.Errorf("the backup answered %d of %d requests", served, n)
			}
			p.awaitLine(t, "serving from the backup level")
			series := `vigil_node_proxy_backup_requests_total{site="www"}`
			if got := metricValue(t, "http://"+metrics+"/metrics", series); got != float64(served) {
				t.Errorf("%s = %v, want %d (the backup's answers)", series, got, served)
			}

			// The control plane switches to level 2 (level 1 unhealthy: no
			// backup any more).
			v = cp.Publish([]publication.Site{{Name: "www", Hostname: "www.example.com", Level: 2, Origins: level2}})
			p.awaitLine(t, fmt.Sprintf("publication applied: version=%d", v))
			for range 20 {
				if code, body := get(); code != http.StatusOK || body != "b1" {
					t.Fatalf("after the switch: %d %q", code, body)
				}
			}
			if got := metricValue(t, "http://"+metrics+"/metrics", series); got != float64(served) {
				t.Errorf("after the switch %s = %v, want it unchanged at %d: level 2 is current, not a backup", series, got, served)
			}
		})
	}
}
