package node

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	"github.com/vigilcdn/vigil/sdk/publication"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// counted is an origin counting the requests it answers.
type counted struct {
	name string
	url  string
	hits atomic.Int64
}

func countedOrigin(t *testing.T, name string) *counted {
	t.Helper()
	c := &counted{name: name}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c.hits.Add(1)
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// TestRampThroughRealProxy: a real vigil-node process follows a test
// control plane publishing a failback ramp of site www from level 2 back
// to level 1, stepped through Weight 5, 25 and 100 (the ramp's end: no
// Ramp, level 1 alone). At each step a load of 400 requests (8 concurrent
// visitors) goes through vigil-node's proxy, and the requests each level's
// origins answered are counted: level 1 gets Weight per cent of them,
// within ±2% (the proxy's split is a per-site counter: exact over every
// 100 requests of the site).
func TestRampThroughRealProxy(t *testing.T) {
	bin := sdktest.Build(t, "./cmd/vigil-node")
	a1, a2, b1 := countedOrigin(t, "a1"), countedOrigin(t, "a2"), countedOrigin(t, "b1")
	level1 := []publication.Origin{{Name: "a1", Address: a1.url, State: "healthy"}, {Name: "a2", Address: a2.url, State: "healthy"}}
	level2 := []publication.Origin{{Name: "b1", Address: b1.url, State: "healthy"}}
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	v := cp.PublishFormat(publication.FormatRamp, []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 2, Origins: level2}})
	listen := testnet.Addr(t)
	p := startNodeProcess(t, bin, nil, "-control-plane", cp.URL(), "-state-dir", t.TempDir(), "-proxy-listen", listen)
	p.awaitLine(t, fmt.Sprintf("publication applied: version=%d", v))

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	t.Cleanup(client.CloseIdleConnections)
	load := func(n, workers int) (errs int) {
		var wg sync.WaitGroup
		var failed atomic.Int64
		var next atomic.Int64
		for range workers {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					req, _ := http.NewRequest(http.MethodGet, "http://"+listen+"/", nil)
					req.Host = "www.example.com"
					resp, err := client.Do(req)
					if err != nil {
						failed.Add(1)
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						failed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return int(failed.Load())
	}
	if errs := load(50, 4); errs != 0 || b1.hits.Load() != 50 {
		t.Fatalf("level 2: %d errors, b1 %d of 50", errs, b1.hits.Load())
	}
	const n = 400
	for _, weight := range []int{5, 25, 100} {
		site := publication.Site{Name: "www", Hostname: "www.example.com", Level: 1, Origins: level1}
		if weight < 100 {
			site.Ramp = &publication.Ramp{Weight: weight, From: 2, FromOrigins: level2}
		}
		v := cp.PublishFormat(publication.FormatRamp, []publication.Site{site})
		p.awaitLine(t, fmt.Sprintf("publication applied: version=%d", v))
		before1, before2 := a1.hits.Load()+a2.hits.Load(), b1.hits.Load()
		if errs := load(n, 8); errs != 0 {
			t.Errorf("weight %d: %d of %d requests failed", weight, errs, n)
		}
		got1, got2 := a1.hits.Load()+a2.hits.Load()-before1, b1.hits.Load()-before2
		share := float64(got1) / n
		t.Logf("weight %3d: level 1 answered %3d, level 2 %3d of %d requests: level 1's share %.3f", weight, got1, got2, n, share)
		if got1+got2 != n {
			t.Errorf("weight %d: %d requests reached an origin, want %d", weight, got1+got2, n)
		}
		if math.Abs(share-float64(weight)/100) > 0.02 {
			t.Errorf("weight %d: level 1's share %.3f, want %.2f ± 0.02", weight, share, float64(weight)/100)
		}
	}
}
