package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

type page struct {
	Round      uint64          `json:"round"`
	Total      int             `json:"total"`
	Counts     map[string]int  `json:"counts"`
	Sites      []*api.SiteView `json:"sites"`
	NextCursor string          `json:"next_cursor"`
}

func fleetServer(t *testing.T, n int) (*httptest.Server, *engine.Engine, enginetest.Sources) {
	t.Helper()
	var b strings.Builder
	b.WriteString("control { sites_per_round = 1000 }\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "site \"s%03d\" {\n  hostname = \"s%03d.example.com\"\n  health_check {\n    unhealthy_threshold = 1\n    healthy_threshold = 1\n  }\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" {\n    address = \"http://127.0.0.1:2\"\n    level = 2\n  }\n}\n", i, i)
	}
	src := enginetest.Sources{}
	e, _ := enginetest.Start(t, enginetest.Config(t, b.String()), src, "")
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e}))
	t.Cleanup(srv.Close)
	return srv, e, src
}

func getPage(t *testing.T, srv *httptest.Server, query string) (int, page) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/v1/sites?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p page
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	return resp.StatusCode, p
}

// TestPagedWalkSeesEverySiteOnce walks /v1/sites page by page while rounds
// run and sites switch: every site comes exactly once.
func TestPagedWalkSeesEverySiteOnce(t *testing.T) {
	const n = 137
	srv, e, src := fleetServer(t, n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			src["direct"].SetDown(fmt.Sprintf("s%03d", i%n), "a", i%2 == 0)
			e.RunRound(ctx)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, limit := range []int{1, 10, 50, 500} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			seen := map[string]int{}
			cursor := ""
			pages := 0
			for {
				q := fmt.Sprintf("limit=%d", limit)
				if cursor != "" {
					q += "&cursor=" + url.QueryEscape(cursor)
				}
				code, p := getPage(t, srv, q)
				if code != 200 {
					t.Fatalf("page %d: status %d", pages, code)
				}
				pages++
				if len(p.Sites) > limit {
					t.Fatalf("a page of %d sites with limit %d", len(p.Sites), limit)
				}
				if p.Total != n {
					t.Fatalf("total %d, want %d", p.Total, n)
				}
				for _, s := range p.Sites {
					seen[s.Site]++
				}
				if p.NextCursor == "" {
					break
				}
				cursor = p.NextCursor
			}
			if len(seen) != n {
				t.Fatalf("the walk saw %d sites, want %d", len(seen), n)
			}
			for name, c := range seen {
				if c != 1 {
					t.Fatalf("site %s came %d times", name, c)
				}
			}
			if want := (n + limit - 1) / limit; pages != want {
				t.Errorf("%d pages of %d, want %d", pages, limit, want)
			}
		})
	}
}

func TestSitesFilters(t *testing.T) {
	srv, e, src := fleetServer(t, 20)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		src["direct"].SetDown(fmt.Sprintf("s%03d", i), "a", true)
	}
	e.RunRound(ctx) // s000..s004 fail over to level 2; the rest turn healthy
	tests := []struct {
		query string
		want  int
	}{
		{"", 20},
		{"status=failed_over", 5},
		{"status=ok", 15},
		{"status=ok,failed_over", 20},
		{"level=2", 5},
		{"problem=true", 5},
		{"prefix=s00", 10},
		{"prefix=s00&status=failed_over", 5},
		{"prefix=zz", 0},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			code, p := getPage(t, srv, tt.query)
			if code != 200 {
				t.Fatalf("status %d", code)
			}
			if len(p.Sites) != tt.want || p.Total != tt.want {
				t.Fatalf("%d sites (total %d), want %d", len(p.Sites), p.Total, tt.want)
			}
			if p.Counts["failed_over"] != 5 || p.Counts["ok"] != 15 {
				t.Fatalf("counts %v, want 5 failed over and 15 ok whatever the filter", p.Counts)
			}
		})
	}
	for _, bad := range []string{"status=broken", "level=0", "level=x", "problem=maybe", "limit=0", "limit=10001", "cursor=!!"} {
		t.Run("bad "+bad, func(t *testing.T) {
			if code, _ := getPage(t, srv, bad); code != 400 {
				t.Fatalf("status %d, want 400", code)
			}
		})
	}
}
