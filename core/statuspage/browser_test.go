package statuspage_test

import (
	"context"
	"errors"
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

// chromiumPath is where Debian's chromium package puts the browser.
const chromiumPath = "/usr/bin/chromium"

const testToken = "browser-test-token"

// The agent under test: one site, two primaries and a backup, rounds every
// 200ms, one vote source whose votes the test sets.
const agentConfig = `
control {
  round_interval = "200ms"
  api { token_env = "UNUSED_IN_THIS_TEST" }
}
source "edge" {
  plugin = "vigil-source-fake"
}
site "www" {
  hostname = "www.example.com"
  health_check {
    path                = "/cdn-health"
    unhealthy_threshold = 2
    healthy_threshold   = 1
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`

// fakeSource votes like two edge nodes would: up for every origin unless
// the test marked it down.
type fakeSource struct {
	name string
	mu   sync.Mutex
	down map[string]bool
	err  error // every Vote fails with it, when set
	// upDetail is the detail of an origin's up votes instead of
	// "status 200", such as "HTTP 404 Not Found" (setUpDetail).
	upDetail map[string]string
}

// setUpDetail makes the up votes for origin carry detail ("": the default).
func (f *fakeSource) setUpDetail(origin, detail string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.upDetail == nil {
		f.upDetail = map[string]string{}
	}
	f.upDetail[origin] = detail
}

// setError makes every Vote fail with err (nil: answer again).
func (f *fakeSource) setError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeSource) Name() string                          { return f.name }
func (f *fakeSource) Start(context.Context) hcl.Diagnostics { return nil }
func (f *fakeSource) Close()                                {}

func (f *fakeSource) setDown(origin string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[origin] = down
}

func (f *fakeSource) Vote(_ context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []sdk.Vote
	for _, t := range b.Targets {
		for _, voter := range []string{"edge-fra-1", "edge-ams-1"} {
			v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: voter, Value: sdk.Up, Reason: sdk.ReasonOK, Detail: "status 200", Latency: 3 * time.Millisecond}
			if d := f.upDetail[t.Origin]; d != "" {
				v.Detail = d
			}
			if f.down[t.Origin] {
				v.Value, v.Reason, v.Detail = sdk.Down, sdk.ReasonConnectFailed, "dial tcp: connection refused"
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// startAgent runs an engine and the API with the status page on a loopback
// httptest server, the way `vigil agent` wires them.
// Status reports two nodes, as the node gateway does (sdk.StatusReporter);
// the API serves them at GET /v1/nodes and the page shows them.
func (s *fakeSource) Status(context.Context) (sdk.Status, error) {
	return sdk.Status{Summary: "2 of 2 nodes online", Items: []sdk.StatusItem{
		{Name: "edge-ams-1", State: "online", Labels: map[string]string{"pop": "ams"}, LastSeen: time.Now().Add(-2 * time.Second)},
		{Name: "edge-fra-1", State: "online", Labels: map[string]string{"pop": "fra"}, LastSeen: time.Now().Add(-1 * time.Second)},
	}}, nil
}

func startAgent(t *testing.T, src *fakeSource, readsNeedToken bool) (*engine.Engine, string) {
	t.Helper()
	cfg, diags := config.Parse("browser_test.hcl", []byte(agentConfig))
	if diags.HasErrors() {
		t.Fatalf("config: %v", diags)
	}
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	eng, diags := engine.New(ctx, cfg, engine.Options{
		Store: st,
		NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource {
			return src
		},
	})
	if diags.HasErrors() {
		cancel()
		st.Close()
		t.Fatalf("engine: %v", diags)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		eng.Run(ctx)
	}()
	handler := httpapi.New(httpapi.Options{
		Engine: eng, Token: testToken, ReadsNeedToken: readsNeedToken, MaxWait: 30 * time.Second,
		Extra: func(mux *http.ServeMux) {
			statuspage.Register(mux, statuspage.Options{})
		},
	})
	srv := httptest.NewServer(handler)
	t.Cleanup(func() {
		cancel()
		<-done
		srv.CloseClientConnections()
		srv.Close()
		eng.Close()
		if err := st.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	return eng, srv.URL
}

// needChromium skips the test when the browser is not installed, and fails
// it under CI, where a missing browser is a broken setup.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but %s is missing: install Debian's chromium package (make deps)", chromiumPath)
		}
		t.Skipf("browser test skipped: %s not found; install Debian's chromium package (make deps) to run it", chromiumPath)
	}
}

// browser starts a headless Chromium with a fresh profile. The page's
// script errors (uncaught exceptions, console.error, Content Security
// Policy refusals) fail the test.
func browser(t *testing.T, parent context.Context) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(parent, opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			bad := m.IsException() ||
				(m.Type == chromedp.ConsoleError && m.Source == "") ||
				strings.Contains(m.Text, "Content Security Policy")
			if bad {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Errorf("page script: %s", p)
		}
	})
	return ctx
}

func artifactDir(t *testing.T) string {
	dir := os.Getenv("VIGIL_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("VIGIL_ARTIFACTS: %v", err)
	}
	return dir
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("saving the screenshot: %v", err)
	}
	t.Logf("screenshot: %s", path)
}

const stepTimeout = 15 * time.Second

// step runs actions with a bounded time and fails the test with what was
// being done.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text is the visible text of the first element matching the CSS selector,
// with its white space collapsed.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("reading the text of %s: %v", sel, err)
	}
	return strings.Join(strings.Fields(s), " ")
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

var (
	visible = func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(chromedp.CSS(sel)) }
	gone    = func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitNotPresent(chromedp.CSS(sel)) }
	click   = func(sel string) chromedp.Action[chromedp.Void] {
		return chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)
	}
	typeIn = func(sel, s string) chromedp.Action[chromedp.Void] {
		return chromedp.SendKeys(chromedp.CSS(sel), s, chromedp.NodeVisible)
	}
)

func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	needChromium(t)
	parent, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := &fakeSource{name: "edge", down: map[string]bool{}}
	// The agent first, so that the browser (cleaned up first) lets go of
	// its long-poll before the server closes.
	eng, url := startAgent(t, src, false)
	ctx := browser(t, parent)
	dir := artifactDir(t)

	const card = `section.site[data-site="www"]`
	step(t, ctx, "load the page and see every origin healthy",
		chromedp.Navigate(url+"/"),
		visible(card+` tr[data-origin="a1"][data-state="healthy"]`),
		visible(card+` tr[data-origin="b1"][data-state="healthy"]`),
		visible(`#nodes-section tr[data-node="edge-fra-1"]`),
	)
	eval[bool](t, ctx, `window.vigilTestNoReload = true`)
	if s := text(t, ctx, card+` tr[data-origin="a1"] td.state`); s != "● healthy" {
		t.Errorf("a1 state cell = %q; want the icon and the word: ● healthy", s)
	}

	t.Run("fail an origin: the card changes without a reload", func(t *testing.T) {
		src.setDown("a1", true)
		step(t, ctx, "wait for a1 to show unhealthy", visible(card+` tr[data-origin="a1"][data-state="unhealthy"]`))
		if s := text(t, ctx, card+` tr[data-origin="a1"] td.state`); s != "✕ unhealthy" {
			t.Errorf("a1 state cell = %q; want ✕ unhealthy", s)
		}
		if s := text(t, ctx, card+` tr[data-origin="a1"] td.reason`); !strings.Contains(s, "connect_failed") {
			t.Errorf("a1 reason = %q; want the votes' connect_failed", s)
		}
		if s := text(t, ctx, card+` tr[data-origin="a1"] td.by`); s != "edge" {
			t.Errorf("a1 settled by %q, want edge", s)
		}
		if !eval[bool](t, ctx, `window.vigilTestNoReload === true`) {
			t.Error("the page reloaded to show the change")
		}
	})

	t.Run("switch level through the page", func(t *testing.T) {
		switchButton := card + ` button[data-key="switch:www:2"]`
		step(t, ctx, "enter a wrong token and try to switch",
			click(`#token-button`),
			visible(`#token-dialog[open] #token-input`),
			typeIn(`#token-input`, "not-the-token"),
			click(`#token-save`),
			gone(`#token-dialog[open]`),
			click(switchButton),
			visible(`#confirm[open] #confirm-text`),
		)
		want := "Switch www from level 1 to level 2? Automatic failback will be held until someone switches back to level 1. Nodes and every publisher get level 2 at once."
		if got := text(t, ctx, `#confirm-text`); got != want {
			t.Errorf("confirmation = %q;\nwant %q", got, want)
		}
		if id := eval[string](t, ctx, `document.activeElement.id`); id != "confirm-cancel" {
			t.Errorf("focus in the open dialog is on #%s, want #confirm-cancel", id)
		}
		step(t, ctx, "have the wrong token refused", click(`#confirm-ok`), visible(`#confirm-error`))
		if got := text(t, ctx, `#confirm-error`); !strings.Contains(got, "the API token sent is not this agent's") {
			t.Errorf("error shown = %q; want the API's message", got)
		}
		if l := eng.Views().Site("www").Level; l != 1 {
			t.Fatalf("a refused switch changed the level to %d", l)
		}

		step(t, ctx, "enter the right token and switch",
			click(`#confirm-cancel`),
			gone(`#confirm[open]`),
			click(`#token-button`),
			visible(`#token-dialog[open] #token-input`),
			typeIn(`#token-input`, testToken),
			typeIn(`#actor-input`, "test operator"),
			click(`#token-save`),
			gone(`#token-dialog[open]`),
			click(switchButton),
			visible(`#confirm[open] #confirm-ok`),
		)
		screenshot(t, ctx, dir, "statuspage-confirm.png")
		step(t, ctx, "confirm the switch",
			click(`#confirm-ok`),
			gone(`#confirm[open]`),
			visible(card+` li.level.current[data-level="2"]`),
		)
		if id := eval[string](t, ctx, `document.activeElement.dataset.key || document.activeElement.id`); id != "site:www" {
			t.Errorf("after the switch focus is on %q; want the site's heading (the button is gone)", id)
		}
		v := eng.Views().Site("www")
		if v.Level != 2 || !v.ManualHold || v.Failback != "auto" {
			t.Errorf("after the switch the engine has level %d, hold %v, failback %s; want 2, held, auto", v.Level, v.ManualHold, v.Failback)
		}
		if s := text(t, ctx, card+` dd.failback`); s != "auto (configured)" {
			t.Errorf("failback shown as %q, want the configured auto", s)
		}
		if s := text(t, ctx, card+` dd.hold`); !strings.Contains(s, "held on level 2") || !strings.Contains(s, "switches to level 1") {
			t.Errorf("manual hold shown as %q", s)
		}
		b1 := v.Origins["b1"]
		if want := fmt.Sprintf("%d/%d good", b1.Successes, v.Thresholds.Healthy); b1.Successes == 0 || text(t, ctx, card+` tr[data-origin="b1"] td.counter`) != want {
			t.Errorf("b1's counter shown as %q, want %q", text(t, ctx, card+` tr[data-origin="b1"] td.counter`), want)
		}
		if href := eval[string](t, ctx, `location.href`); strings.Contains(href, testToken) {
			t.Errorf("the token is in the URL: %s", href)
		}
		if kept := eval[string](t, ctx, `sessionStorage.getItem("vigil.token") || ""`); kept != testToken {
			t.Errorf("sessionStorage holds %q, want the token", kept)
		}
		if s := text(t, ctx, card+` .cur-level`); s != "On level 2 ● healthy" {
			t.Errorf("current level shown as %q", s)
		}
		screenshot(t, ctx, dir, "statuspage.png")
	})

	t.Run("disable an origin through the page", func(t *testing.T) {
		step(t, ctx, "ask to disable b1",
			click(card+` button[data-key="disable:www:b1"]`),
			visible(`#confirm[open] #confirm-ok`),
		)
		if got := text(t, ctx, `#confirm-text`); !strings.HasPrefix(got, "Disable origin b1 of www?") {
			t.Errorf("confirmation = %q", got)
		}
		if extra := text(t, ctx, `#confirm-extra`); !strings.Contains(extra, "Level 2 will have no enabled origin") {
			t.Errorf("the consequence for the level is not spelled out: %q", extra)
		}
		step(t, ctx, "confirm, and have the maintenance guard refuse it",
			click(`#confirm-ok`),
			visible(`#confirm-error`),
			visible(`#confirm-ok[data-forced="true"]`),
		)
		if got := text(t, ctx, `#confirm-error`); !strings.Contains(got, "last enabled origin of level 2") || !strings.Contains(got, "vigil switch www 1") {
			t.Errorf("the guard's refusal shown as %q; want the reason and the way out", got)
		}
		if s := eng.Views().Site("www").Origins["b1"].State; s == "disabled" {
			t.Fatalf("the refused disable went through")
		}
		if got := text(t, ctx, `#confirm-ok`); got != "Disable anyway" {
			t.Errorf("after the refusal the button says %q, want Disable anyway", got)
		}
		step(t, ctx, "force it",
			click(`#confirm-ok`),
			visible(card+` tr[data-origin="b1"][data-state="disabled"]`),
		)
		if s := eng.Views().Site("www").Origins["b1"].State; s != "disabled" {
			t.Errorf("b1 is %s in the engine, want disabled", s)
		}
		if s := text(t, ctx, card+` tr[data-origin="b1"] td.state`); s != "– disabled" {
			t.Errorf("b1 state cell = %q, want – disabled", s)
		}
	})

	t.Run("site view lists the site's events and votes", func(t *testing.T) {
		step(t, ctx, "open the site view",
			click(card+` h2 a`),
			visible(`#events-section`),
			visible(`section.site.detail tr[data-voter="edge-fra-1"]`),
			visible(`#events-body tr`),
		)
		events := text(t, ctx, `#events-body`)
		for _, want := range []string{"Switched from level 1 to level 2 (manual)", "test operator (status page)", "Origin a1: ● healthy → ✕ unhealthy"} {
			if !strings.Contains(events, want) {
				t.Errorf("the site's events lack %q:\n%s", want, events)
			}
		}
		if h1 := text(t, ctx, `h1`); h1 != "Site www" {
			t.Errorf("h1 = %q, want Site www", h1)
		}
		screenshot(t, ctx, dir, "statuspage-site.png")
	})

	t.Run("phone layout", func(t *testing.T) {
		step(t, ctx, "narrow the viewport and reload",
			chromedp.EmulateViewport(390, 844),
			chromedp.Navigate(url+"/"),
			visible(card+` tr[data-origin="a1"]`),
		)
		if eval[bool](t, ctx, `document.documentElement.scrollWidth > window.innerWidth + 1`) {
			t.Error("the page is wider than a phone screen")
		}
		screenshot(t, ctx, dir, "statuspage-phone.png")
	})

	t.Run("a failing vote source shows in a banner with its error", func(t *testing.T) {
		if !eval[bool](t, ctx, `document.getElementById('sources-trouble').hidden`) {
			t.Fatal("the failing-source banner shows while every source answers")
		}
		src.setError(errors.New(`source "edge": plugin error: quota exhausted (ResourceExhausted)`))
		step(t, ctx, "wait for the banner", visible(`#sources-trouble li[data-source="edge"]`))
		got := text(t, ctx, `#sources-trouble`)
		for _, want := range []string{"A vote source is failing", "✕ edge: failed the last", "quota exhausted (ResourceExhausted)", "vigil probe SITE"} {
			if !strings.Contains(got, want) {
				t.Errorf("the banner lacks %q: %s", want, got)
			}
		}
		screenshot(t, ctx, dir, "statuspage-failing-source.png")
		src.setError(nil)
		step(t, ctx, "wait for the banner to go once the source answers", chromedp.WaitNotVisible(chromedp.CSS(`#sources-trouble`)))
	})
}

// With read_access = "token" the page asks for the token before it can show
// anything, and shows the sites once it has it.
func TestBrowserReadsNeedToken(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	needChromium(t)
	parent, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, url := startAgent(t, &fakeSource{name: "edge", down: map[string]bool{}}, true)
	ctx := browser(t, parent)
	step(t, ctx, "load the page and be asked for the token",
		chromedp.Navigate(url+"/#/site/www"),
		visible(`#token-dialog[open] #token-input`),
	)
	if why := text(t, ctx, `#token-why`); !strings.Contains(why, "needs its API token") {
		t.Errorf("the token dialog does not say why it is asking: %q", why)
	}
	if s := text(t, ctx, `#conn-text`); s != "Token needed to read" {
		t.Errorf("status line = %q", s)
	}
	step(t, ctx, "give the token and see the site with its events",
		typeIn(`#token-input`, testToken),
		click(`#token-save`),
		visible(`section.site.detail[data-site="www"] tr[data-origin="a1"]`),
		visible(`#events-body tr`),
	)
	if s := eval[string](t, ctx, `document.getElementById("notice").hidden ? "" : document.getElementById("notice").textContent`); s != "" {
		t.Errorf("a notice stayed after the token was given: %q", s)
	}
}
