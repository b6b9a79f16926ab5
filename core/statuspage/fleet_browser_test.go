package statuspage_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/httpapi"
	"github.com/vigilcdn/vigil/core/statuspage"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

const fleetSites = 300

// fleetConfig is 300 sites of a primary and a backup; site-010 to site-012
// fail back by hand.
func fleetConfig() string {
	var b strings.Builder
	b.WriteString(`
control { round_interval = "200ms" }
source "edge" { plugin = "vigil-source-fake" }
`)
	for i := range fleetSites {
		failback := "auto"
		if i >= 10 && i <= 12 {
			failback = "manual"
		}
		fmt.Fprintf(&b, `site "site-%03d" {
  hostname = "site-%03d.example.com"
  failback = %q
  health_check {
    unhealthy_threshold = 2
    healthy_threshold   = 1
  }
  origin "a" { address = "http://127.0.0.1:1" }
  origin "b" {
    address = "http://127.0.0.1:2"
    level   = 2
  }
}
`, i, i, failback)
	}
	return b.String()
}

// fleetSource votes up with a latency for every origin unless the test
// marked it down.
type fleetSource struct {
	mu   sync.Mutex
	down map[string]bool // "site/origin"
}

func (f *fleetSource) Name() string                          { return "edge" }
func (f *fleetSource) Start(context.Context) hcl.Diagnostics { return nil }
func (f *fleetSource) Close()                                {}

func (f *fleetSource) set(site, origin string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[site+"/"+origin] = down
}

func (f *fleetSource) Vote(_ context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]sdk.Vote, 0, len(b.Targets))
	for i, t := range b.Targets {
		v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: "edge-1", Value: sdk.Up, Reason: sdk.ReasonOK,
			Latency: time.Duration(2000+100*(i%17)) * time.Microsecond}
		if f.down[t.Site+"/"+t.Origin] {
			v.Value, v.Reason, v.Latency = sdk.Down, sdk.ReasonTimeout, 400*time.Millisecond
		}
		out = append(out, v)
	}
	return out, nil
}

// startFleet runs the engine with its history feed and the API with the
// page, the way `vigil agent` wires them. historyReads counts the history
// requests by site.
func startFleet(t *testing.T, src *fleetSource) (string, func() map[string]int) {
	t.Helper()
	cfg, diags := config.Parse("fleet.hcl", []byte(fleetConfig()))
	if diags.HasErrors() {
		t.Fatalf("config: %v", diags)
	}
	dir := t.TempDir()
	st, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var feed *engine.HistoryFeed
	eng, diags := engine.New(ctx, cfg, engine.Options{Store: st,
		NewSource:  func(*config.Source, string, hclog.Logger) engine.VoteSource { return src },
		AfterRound: func(r engine.RoundResult) { feed.AfterRound(r) },
	})
	if diags.HasErrors() {
		cancel()
		t.Fatalf("engine: %v", diags)
	}
	feed = engine.OpenHistory(dir, eng, engine.HistoryOptions{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		eng.Run(ctx)
	}()
	var mu sync.Mutex
	reads := map[string]int{}
	handler := httpapi.New(httpapi.Options{Engine: eng, Token: testToken, MaxWait: 30 * time.Second, History: feed,
		Extra: func(mux *http.ServeMux) { statuspage.Register(mux, statuspage.Options{}) }})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if site, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v1/sites/"), "/history"); ok {
			mu.Lock()
			reads[site]++
			mu.Unlock()
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		cancel()
		<-done
		srv.CloseClientConnections()
		srv.Close()
		feed.Close()
		eng.Close()
		st.Close()
	})
	return srv.URL, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range reads {
			out[k] = v
		}
		return out
	}
}

// The status page of a 300-site fleet: the summary counts, problems
// first, filtering by status and by name, and the history strip of an
// origin through a failover.
func TestBrowserFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	needChromium(t)
	parent, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src := &fleetSource{down: map[string]bool{}}
	for i := range 13 { // site-000 to -009 fail over and back by themselves; -010 to -012 by hand
		src.set(fmt.Sprintf("site-%03d", i), "a", true)
	}
	src.set("site-020", "a", true) // every level down
	src.set("site-020", "b", true)
	url, historyReads := startFleet(t, src)
	ctx := browser(t, parent)
	dir := artifactDir(t)

	step(t, ctx, "load the page and see the failovers counted",
		chromedp.Navigate(url+"/"),
		visible(`#fleet-summary[data-n="300"]`),
		visible(`[data-count="failed_over"][data-n="13"]`),
		visible(`[data-count="down"][data-n="1"]`),
	)
	// The manual-failback sites recover: they stay on level 2, waiting.
	for i := 10; i <= 12; i++ {
		src.set(fmt.Sprintf("site-%03d", i), "a", false)
	}
	step(t, ctx, "see the failbacks waiting", visible(`[data-fact="failback_waiting"][data-n="3"]`))

	t.Run("summary counts", func(t *testing.T) {
		want := map[string]string{"ok": "286", "failed_over": "13", "down": "1", "degraded": "0", "paused": "0", "unknown": "0"}
		for k, n := range want {
			if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('[data-count="%s"]').dataset.n`, k)); got != n {
				t.Errorf("%s counted %s, want %s", k, got, n)
			}
		}
		for k, n := range map[string]string{"off_top_level": "13", "all_unhealthy": "1", "failback_waiting": "3"} {
			if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('[data-fact="%s"]').dataset.n`, k)); got != n {
				t.Errorf("%s = %s, want %s", k, got, n)
			}
		}
	})

	t.Run("problems first, compact rows", func(t *testing.T) {
		order := eval[[]string](t, ctx, `[...document.querySelectorAll('#rows > .site-row')].slice(0, 15).map((r) => r.dataset.site + ':' + r.dataset.status)`)
		want := []string{"site-020:down"}
		for i := range 13 {
			want = append(want, fmt.Sprintf("site-%03d:failed_over", i))
		}
		want = append(want, "site-013:ok")
		if strings.Join(order, " ") != strings.Join(want, " ") {
			t.Errorf("first rows %v,\nwant %v", order, want)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll('#rows > .site-row').length`); n != 200 {
			t.Errorf("%d rows on the first page, want 200", n)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll('#rows .site-row[data-expanded="true"]').length`); n != 0 {
			t.Errorf("%d rows open in a 300-site fleet, want none", n)
		}
		perRow := eval[float64](t, ctx, `(() => { const r = document.querySelectorAll('#rows > .site-row'); return (r[199].getBoundingClientRect().bottom - r[0].getBoundingClientRect().top) / 200; })()`)
		t.Logf("a compact row is %.0f px: %.0f sites a 900 px screen", perRow, 900/perRow)
		if perRow > 60 {
			t.Errorf("a compact row is %.0f px tall", perRow)
		}
		if got := historyReads(); len(got) != 0 {
			t.Errorf("closed rows read their history: %v", got)
		}
		screenshot(t, ctx, dir, "statuspage-fleet.png")
		viewShot(t, ctx, dir, "statuspage-fleet-screen.png")
	})

	t.Run("filter by status and by name", func(t *testing.T) {
		step(t, ctx, "show only the failed-over sites",
			click(`[data-count="failed_over"]`),
			visible(`[data-count="failed_over"][aria-pressed="true"]`),
		)
		waitFor(t, ctx, `[...document.querySelectorAll('#rows > .site-row')].length === 13 && [...document.querySelectorAll('#rows > .site-row')].every((r) => r.dataset.status === 'failed_over')`)
		screenshot(t, ctx, dir, "statuspage-fleet-filter.png")
		step(t, ctx, "back to every site, and search for site-01",
			click(`[data-key="filter-all"]`),
			typeIn(`#search`, "site-01"),
		)
		waitFor(t, ctx, `document.querySelectorAll('#rows > .site-row').length === 10`)
		order := eval[[]string](t, ctx, `[...document.querySelectorAll('#rows > .site-row')].map((r) => r.dataset.site)`)
		if order[0] != "site-010" || order[3] != "site-013" || order[9] != "site-019" {
			t.Errorf("search rows %v", order)
		}
		step(t, ctx, "search for nothing that exists", typeIn(`#search`, "x"), visible(`#no-match`))
		eval[bool](t, ctx, `(() => { const s = document.getElementById('search'); s.value = ''; s.dispatchEvent(new Event('input')); return true; })()`)
		waitFor(t, ctx, `document.querySelectorAll('#rows > .site-row').length === 200`)
	})

	t.Run("history strip through a failover", func(t *testing.T) {
		const row = `section.site-row[data-site="site-100"]`
		step(t, ctx, "open site-100",
			click(row+` button.expand`),
			visible(row+` [data-history="site-100"] tr[data-origin="a"] svg.strip-svg`),
		)
		waitFor(t, ctx, `Number(document.querySelector('[data-history="site-100"] tr[data-origin="a"] svg.strip-svg').dataset.up) >= 3`)
		src.set("site-100", "a", true)
		step(t, ctx, "see it fail over", visible(row+`[data-status="failed_over"]`))
		waitFor(t, ctx, `Number(document.querySelector('[data-history="site-100"] tr[data-origin="a"] svg.strip-svg').dataset.down) >= 3`)
		bars := eval[[]string](t, ctx, `[...document.querySelectorAll('[data-history="site-100"] tr[data-origin="a"] rect[data-verdict]')].map((r) => r.dataset.verdict)`)
		s := strings.Join(bars, "")
		if !strings.Contains(s, "upupup") || !strings.HasSuffix(s, "downdowndown") {
			t.Errorf("the strip reads %v; want ups, then the downs of the failover at its right end", bars)
		}
		up := text(t, ctx, `[data-history="site-100"] tr[data-origin="a"] td.uptime`)
		if !strings.Contains(up, "%") || strings.HasPrefix(up, "100%") {
			t.Errorf("uptime of a1 after the failover: %q", up)
		}
		if b := eval[string](t, ctx, `document.querySelector('[data-history="site-100"] tr[data-origin="b"] svg.strip-svg').dataset.down`); b != "0" {
			t.Errorf("the backup has %s down rounds", b)
		}
		if got := text(t, ctx, row+` tr[data-origin="a"] td.counter`); got != "2/2 failed" {
			t.Errorf("counter cell %q, want 2/2 failed", got)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll('`+row+` td.counter svg.meter rect.pip.on').length`); n < 1 {
			t.Errorf("no counter pips lit")
		}
		screenshot(t, ctx, dir, "statuspage-fleet-history.png")
		elementShot(t, ctx, dir, row, "statuspage-fleet-history-row.png")
		for site := range historyReads() {
			if site != "site-100" {
				t.Errorf("the history of %s was read, though its row is closed", site)
			}
		}
	})
}

// waitFor polls a JavaScript condition until it is true or the step
// timeout passes.
func waitFor(t *testing.T, ctx context.Context, cond string) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		if eval[bool](t, ctx, cond) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still false after %s: %s", stepTimeout, cond)
		}
		step(t, ctx, "wait", chromedp.Sleep(100*time.Millisecond))
	}
}

// elementShot saves a screenshot of the first element matching sel.
func elementShot(t *testing.T, ctx context.Context, dir, sel, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.Screenshot(chromedp.CSS(sel), chromedp.NodeVisible))
	saveShot(t, png, err, dir, name)
}

// viewShot saves a screenshot of what one screen shows.
func viewShot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	saveShot(t, png, err, dir, name)
}

func saveShot(t *testing.T, png []byte, err error, dir, name string) {
	t.Helper()
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("saving the screenshot: %v", err)
	}
	t.Logf("screenshot: %s", path)
}
