package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

const clientConfig = `
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`

// TestClientAgainstTheServer runs the typed client against the real
// server: answers decode into the shared types, and every refusal is one
// *api.Error with its status, code and hint.
func TestClientAgainstTheServer(t *testing.T) {
	e, _ := enginetest.Start(t, enginetest.Config(t, clientConfig), enginetest.Sources{}, "")
	ctx := context.Background()
	e.RunRound(ctx)
	e.RunRound(ctx)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e, Token: "t", MaxWait: 2 * time.Second}))
	t.Cleanup(srv.Close)
	c := api.NewClient(srv.URL, "t")
	anon := api.NewClient(srv.URL, "")

	site, err := c.Site(ctx, "www")
	if err != nil || site.Level != 1 || site.TopLevel() != 1 || site.Origins["a1"].State != "healthy" || site.Thresholds.Unhealthy != 3 {
		t.Fatalf("Site = %+v, %v", site, err)
	}
	page, err := c.Sites(ctx, api.SitesQuery{Limit: 1})
	if err != nil || len(page.Sites) != 1 || page.Total != 1 || page.Counts[api.StatusOK] != 1 {
		t.Fatalf("Sites = %+v, %v", page, err)
	}
	refusals := []struct {
		name   string
		call   func() error
		status int
		code   string
	}{
		{"unknown site", func() error { _, err := c.Site(ctx, "nope"); return err }, 404, api.CodeUnknownSite},
		{"token missing", func() error { _, err := anon.Switch(ctx, "www", 2); return err }, 401, api.CodeTokenMissing},
		{"token refused", func() error { _, err := api.NewClient(srv.URL, "x").Switch(ctx, "www", 2); return err }, 401, api.CodeTokenRefused},
		{"unknown level", func() error { _, err := c.Switch(ctx, "www", 7); return err }, 400, api.CodeUnknownLevel},
		{"unknown origin", func() error { _, err := c.Disable(ctx, "www", "zz", false); return err }, 404, api.CodeUnknownOrigin},
	}
	for _, r := range refusals {
		var ae *api.Error
		if err := r.call(); !errors.As(err, &ae) || ae.Status != r.status || ae.Code != r.code || ae.Message == "" {
			t.Errorf("%s: %v (%+v), want %d %s", r.name, err, ae, r.status, r.code)
		}
	}
	a, err := c.Switch(ctx, "www", 2)
	if err != nil || len(a.Events) != 1 {
		t.Fatalf("Switch = %+v, %v", a, err)
	}
	var ae *api.Error
	if _, err := c.Disable(ctx, "www", "b1", false); !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != api.CodeLastEnabledOrigin || ae.Hint == "" {
		t.Errorf("the guard through the client: %v", err)
	}
	events, err := c.Events(ctx, api.EventsQuery{Site: "www"})
	if err != nil || len(events) == 0 || events[len(events)-1].Event.Kind.String() != "level_switched" || events[len(events)-1].Actor != "api" {
		t.Fatalf("Events = %+v, %v", events, err)
	}
	cur := e.Hub().Current().Version
	if snap, changed, err := c.Publication(ctx, cur, 50*time.Millisecond); err != nil || changed || snap != nil {
		t.Errorf("Publication after the current one = %v %v %v, want no change (304)", snap, changed, err)
	}
	if snap, changed, err := c.Publication(ctx, 0, time.Second); err != nil || !changed || snap.Version != cur {
		t.Errorf("Publication after 0 = %v %v %v, want version %d", snap, changed, err, cur)
	}
	sources, err := c.Sources(ctx)
	if err != nil || len(sources) != 1 || sources[0].Name != "direct" {
		t.Errorf("Sources = %+v, %v", sources, err)
	}
}
