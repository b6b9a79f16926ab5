package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

const drillSite = `
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`

// TestDrillRoutes: POST, GET and DELETE /v1/sites/{site}/drill over
// HTTP: the operator's token only, and every refusal a status, a code
// and a message that names the problem.
func TestDrillRoutes(t *testing.T) {
	ctx := context.Background()
	e, _ := enginetest.Start(t, enginetest.Config(t, drillSite), enginetest.Sources{}, "")
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e, Token: "op-token", ReadToken: "read-token"}))
	t.Cleanup(srv.Close)
	op := api.NewClient(srv.URL, "op-token")
	op.Actor = "alice@test"
	reader := api.NewClient(srv.URL, "read-token")

	refused := func(t *testing.T, err error, status int, code, msg string) {
		t.Helper()
		var ae *api.Error
		if !errors.As(err, &ae) {
			t.Fatalf("got %v, want an API error %d %s", err, status, code)
		}
		if ae.Status != status || ae.Code != code || !strings.Contains(ae.Message, msg) {
			t.Fatalf("got %d %s %q (hint %q), want %d %s saying %q", ae.Status, ae.Code, ae.Message, ae.Hint, status, code, msg)
		}
	}
	t.Run("read token", func(t *testing.T) {
		_, err := reader.StartDrill(ctx, "www", api.DrillRequest{})
		refused(t, err, http.StatusForbidden, "token_scope", "needs the operator scope")
	})
	t.Run("no healthy level yet", func(t *testing.T) {
		_, err := op.StartDrill(ctx, "www", api.DrillRequest{})
		refused(t, err, http.StatusConflict, "no_healthy_level", "no healthy level besides level 1")
	})
	e.RunRound(ctx)
	e.RunRound(ctx)
	for _, c := range []struct {
		name, site string
		req        api.DrillRequest
		status     int
		code, msg  string
	}{
		{"bad duration", "www", api.DrillRequest{For: "soon"}, http.StatusBadRequest, "bad_duration", `"for": "soon" is not a positive duration`},
		{"zero duration", "www", api.DrillRequest{For: "0s"}, http.StatusBadRequest, "bad_duration", "not a positive duration"},
		{"too long", "www", api.DrillRequest{For: "48h"}, http.StatusBadRequest, "bad_duration", "at most 24h0m0s"},
		{"unknown level", "www", api.DrillRequest{Level: 9}, http.StatusBadRequest, "unknown_level", "site www has no level 9 (its levels are 1, 2)"},
		{"unknown site", "nope", api.DrillRequest{}, http.StatusNotFound, "unknown_site", "no site nope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := op.StartDrill(ctx, c.site, c.req)
			refused(t, err, c.status, c.code, c.msg)
		})
	}
	d, err := op.StartDrill(ctx, "www", api.DrillRequest{For: "2m"})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Running || d.Level != 1 || d.Actor != "alice@test" || d.Until.Sub(d.Started).Minutes() != 2 {
		t.Fatalf("started %+v", d)
	}
	_, err = op.StartDrill(ctx, "www", api.DrillRequest{})
	refused(t, err, http.StatusConflict, "drill_running", "a drill of level 1 is already running, started by alice@test")
	if got, err := reader.Drill(ctx, "www"); err != nil || !got.Running {
		t.Fatalf("GET with the read token: %+v, %v", got, err)
	}
	_, err = reader.AbortDrill(ctx, "www")
	refused(t, err, http.StatusForbidden, "token_scope", "needs the operator scope")
	if got, err := op.AbortDrill(ctx, "www"); err != nil || got.Running || got.End != api.DrillEndAborted {
		t.Fatalf("abort: %+v, %v", got, err)
	}
	_, err = op.AbortDrill(ctx, "www")
	refused(t, err, http.StatusNotFound, "no_drill", "site www has no drill running")
	// Aborted at once: the site never left level 1, so the next round
	// forgets the drill.
	e.RunRound(ctx)
	_, err = op.Drill(ctx, "www")
	refused(t, err, http.StatusNotFound, "no_drill", "site www has no drill")
	evs, err := op.Events(ctx, api.EventsQuery{Site: "www"})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range evs {
		if e.Event.Kind == api.KindDrillStarted || e.Event.Kind == api.KindDrillEnded {
			lines = append(lines, e.Event.String()+" by "+e.Actor)
		}
	}
	if got := strings.Join(lines, "; "); got != "drill of level 1 started for 120s by alice@test; drill of level 1 ended (aborted) by alice@test" {
		t.Errorf("journal: %s", got)
	}
}
