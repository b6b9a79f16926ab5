package statuspage_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/httpapi"
	"github.com/vigilcdn/vigil/core/statuspage"
	"github.com/vigilcdn/vigil/core/store"
)

// manualConfig is agentConfig with a manual failback.
var manualConfig = strings.Replace(agentConfig, `  health_check {`, `  failback = "manual"
  health_check {`, 1)

// startManualAgent runs an agent of manualConfig with a history file on
// a loopback test server; offline makes every request fail with 503, as
// an agent that went away would.
func startManualAgent(t *testing.T, src *fakeSource) (url string, offline *atomic.Bool) {
	t.Helper()
	cfg, diags := config.Parse("manual.hcl", []byte(manualConfig))
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
		st.Close()
		t.Fatalf("engine: %v", diags)
	}
	feed = engine.OpenHistory(dir, eng, engine.HistoryOptions{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		eng.Run(ctx)
	}()
	handler := httpapi.New(httpapi.Options{Engine: eng, Token: testToken, MaxWait: 30 * time.Second, History: feed,
		Extra: func(mux *http.ServeMux) { statuspage.Register(mux, statuspage.Options{}) }})
	offline = &atomic.Bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if offline.Load() && strings.HasPrefix(r.URL.Path, "/v1/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"code":"unavailable","message":"agent gone"}}`))
			return
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
	return srv.URL, offline
}

// TestBrowserHiddenStates: the page says a manual failback is waiting,
// says how much data an uptime covers, and greys out what it cannot
// refresh once the agent is gone (issue 33, no hidden states).
func TestBrowserHiddenStates(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	needChromium(t)
	parent, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := &fakeSource{name: "edge", down: map[string]bool{}}
	url, offline := startManualAgent(t, src)
	ctx := browser(t, parent)

	const card = `section.site.detail[data-site="www"]`
	step(t, ctx, "open the site's page",
		chromedp.Navigate(url+"/#/site/www"),
		visible(card+` tr[data-origin="a1"][data-state="healthy"]`),
	)
	src.setDown("a1", true)
	src.setDown("a2", true)
	waitFor(t, ctx, `(document.querySelector('`+card+` .cur-level .level-no') || {}).textContent === '2'`)
	src.setDown("a1", false)
	src.setDown("a2", false)

	t.Run("a manual failback waiting", func(t *testing.T) {
		const waiting = card + ` dd.waiting[data-why="manual"][data-level="1"]`
		step(t, ctx, "wait for the waiting failback", visible(waiting))
		if got, want := text(t, ctx, waiting), "manual failback waiting: level 1 is healthy; run vigil switch www 1"; got != want {
			t.Errorf("waiting = %q, want %q", got, want)
		}
		screenshot(t, ctx, artifactDir(t), "manual-failback-waiting.png")
	})
	t.Run("an uptime says how much data it covers", func(t *testing.T) {
		const partial = card + ` tr[data-origin="a1"] td.uptime .partial`
		step(t, ctx, "wait for the history", visible(partial))
		got := text(t, ctx, card+` tr[data-origin="a1"] td.uptime`)
		if !strings.Contains(got, " s of data") || strings.Count(got, "%") != 1 {
			t.Errorf("uptime cell = %q; want one value over the seconds of data kept, not three", got)
		}
	})
	t.Run("greyed out while disconnected", func(t *testing.T) {
		if eval[bool](t, ctx, `document.body.dataset.stale === 'true'`) {
			t.Fatal("the page is greyed out while connected")
		}
		offline.Store(true)
		step(t, ctx, "wait for the page to grey out", visible(`body[data-stale="true"] #sites`))
		if got := text(t, ctx, "#conn-text"); !strings.Contains(got, "Disconnected") || !strings.Contains(got, "What is shown is from") {
			t.Errorf("status line = %q; want it disconnected, saying how old the page is", got)
		}
		if f := eval[string](t, ctx, `getComputedStyle(document.getElementById('sites')).filter`); !strings.Contains(f, "grayscale") {
			t.Errorf("the sites' filter is %q, want a grayscale", f)
		}
		screenshot(t, ctx, artifactDir(t), "disconnected-greyed.png")
		offline.Store(false)
		step(t, ctx, "wait for the page to come back", visible(`body[data-stale="false"] #sites`))
	})
}
