package statuspage_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserHintsAtClientErrors: an origin whose voters found it up on
// an HTTP 404 gets the hint on its site's card (the list and the site's
// own page), naming the status and expected_status; the other origins get
// none, and the hint goes when the origin answers 200 again.
func TestBrowserHintsAtClientErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	needChromium(t)
	parent, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := &fakeSource{name: "edge", down: map[string]bool{}}
	src.setUpDetail("a1", "HTTP 404 Not Found")
	_, url := startAgent(t, src, false)
	ctx := browser(t, parent)

	const card = `section.site[data-site="www"]`
	const hint = card + ` p.hint[data-origin="a1"]`
	step(t, ctx, "load the page and see a1's hint",
		chromedp.Navigate(url+"/"),
		visible(card+` tr[data-origin="a1"][data-state="healthy"]`),
		visible(hint),
	)
	check := func(t *testing.T) {
		t.Helper()
		got := text(t, ctx, hint)
		for _, want := range []string{"a1: HTTP 404 counts as up: is the health path right?", "expected_status"} {
			if !strings.Contains(got, want) {
				t.Errorf("hint = %q; want %q in it", got, want)
			}
		}
		if n := eval[int](t, ctx, `document.querySelectorAll('`+card+` p.hint').length`); n != 1 {
			t.Errorf("%d hints on the card, want 1 (a1's only)", n)
		}
	}
	t.Run("the list's card", check)
	screenshot(t, ctx, artifactDir(t), "hint-404.png")
	t.Run("the site's page", func(t *testing.T) {
		step(t, ctx, "open the site's page", chromedp.Navigate(url+"/#/site/www"), visible(`section.site.detail`+` p.hint[data-origin="a1"]`))
		check(t)
	})
	t.Run("gone once a1 answers 200", func(t *testing.T) {
		src.setUpDetail("a1", "status 200")
		step(t, ctx, "wait for the hint to go", gone(hint))
	})
	t.Run("back on a checkpoint's status 410", func(t *testing.T) {
		src.setUpDetail("a1", "status 410") // as the dnspup source words it
		step(t, ctx, "wait for the hint", visible(hint))
		if got := text(t, ctx, hint); !strings.Contains(got, "a1: HTTP 410 counts as up") {
			t.Errorf("hint = %q; want it to name HTTP 410", got)
		}
	})
}
