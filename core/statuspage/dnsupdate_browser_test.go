package statuspage_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/httpapi"
	"github.com/vigilcdn/vigil/core/statuspage"
)

// fakeDNSUpdates is a readmodel.DNSUpdates whose state the test sets.
type fakeDNSUpdates struct {
	mu sync.Mutex
	v  *api.DNSUpdateView
}

func (f *fakeDNSUpdates) set(v *api.DNSUpdateView) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.v = v
}

func (f *fakeDNSUpdates) DNSUpdate(_, _ string) *api.DNSUpdateView {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.v == nil {
		return nil
	}
	cp := *f.v
	return &cp
}

// TestBrowserDNSUpdate: the site card shows its name's dynamic update:
// a failing one with its error and failures, then ok with the version
// pushed, and nothing without dns_update.
func TestBrowserDNSUpdate(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	needChromium(t)
	parent, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eng, _ := startAgent(t, &fakeSource{name: "edge", down: map[string]bool{}}, false)
	upd := &fakeDNSUpdates{}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: eng, MaxWait: 30 * time.Second, DNSUpdates: upd,
		Extra: func(mux *http.ServeMux) { statuspage.Register(mux, statuspage.Options{}) }}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	ctx := browser(t, parent)

	const card = `section.site[data-site="www"]`
	const dd = card + ` dd.dns-update`
	at := time.Now().Add(-5 * time.Second)
	upd.set(&api.DNSUpdateView{Name: "www.example.com.", State: api.DNSUpdateFailing, Version: 4, Failures: 2, At: &at,
		Error: "UPDATE www.example.com. refused by 127.0.0.1:53: REFUSED"})
	step(t, ctx, "load the page and see the failing update",
		chromedp.Navigate(srv.URL+"/"), visible(dd+`[data-state="failing"]`))
	got := text(t, ctx, dd)
	for _, want := range []string{"www.example.com. failing", "v4", "2 failed updates", "REFUSED"} {
		if !strings.Contains(got, want) {
			t.Errorf("dns update = %q; want %q in it", got, want)
		}
	}
	screenshot(t, ctx, artifactDir(t), "dns-update-failing.png")

	upd.set(&api.DNSUpdateView{Name: "www.example.com.", State: api.DNSUpdateOK, Version: 5, At: &at})
	step(t, ctx, "reload and see it ok", chromedp.Reload(), visible(dd+`[data-state="ok"]`))
	if got := text(t, ctx, dd); !strings.Contains(got, "www.example.com. ok: publication v5 pushed") {
		t.Errorf("dns update = %q; want it ok with v5", got)
	}

	upd.set(nil)
	step(t, ctx, "reload without dns_update", chromedp.Reload(), visible(card), gone(dd))
}
