package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

// TestFailoversRoutes: GET /v1/sites/{site}/failovers and POST
// /v1/publication/applied refuse what they cannot use with the error
// naming it, take a node's acknowledgement with the node token, and serve
// the failover's report with that node's row.
func TestFailoversRoutes(t *testing.T) {
	src := enginetest.Sources{}
	e, _ := enginetest.Start(t, enginetest.Config(t, cfg), src, "")
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e, Token: "op", NodeToken: "node", ReadsNeedToken: true, MaxWait: 5 * time.Second}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	e.RunRound(ctx)
	e.RunRound(ctx)
	version := itoa(e.Hub().Current().Version)

	for _, tc := range []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"unknown site", "GET", "/v1/sites/nope/failovers", "op", "", 404, "unknown_site"},
		{"limit 0", "GET", "/v1/sites/www/failovers?limit=0", "op", "", 400, "bad_request"},
		{"limit above 100", "GET", "/v1/sites/www/failovers?limit=101", "op", "", 400, "bad_request"},
		{"limit not a number", "GET", "/v1/sites/www/failovers?limit=ten", "op", "", 400, "bad_request"},
		{"the node token does not read reports", "GET", "/v1/sites/www/failovers", "node", "", 403, "token_scope"},
		{"none yet", "GET", "/v1/sites/www/failovers", "op", "", 200, ""},
		{"no token", "POST", "/v1/publication/applied", "", `{"node":"n1","version":1}`, 401, ""},
		{"not JSON", "POST", "/v1/publication/applied", "node", `{`, 400, "bad_request"},
		{"no node", "POST", "/v1/publication/applied", "node", `{"version":1}`, 400, "bad_request"},
		{"no version", "POST", "/v1/publication/applied", "node", `{"node":"n1"}`, 400, "bad_request"},
		{"taken", "POST", "/v1/publication/applied", "node", `{"node":"n1","version":` + version + `,"at":"2026-12-02T07:00:00Z"}`, 204, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, m := call(t, srv, tc.method, tc.path, tc.token, tc.body)
			if status != tc.status || tc.code != "" && errCode(m) != tc.code {
				t.Fatalf("%s %s: %d %v, want %d %s", tc.method, tc.path, status, m, tc.status, tc.code)
			}
			if tc.name == "none yet" {
				if fo, ok := m["failovers"].([]any); !ok || len(fo) != 0 || m["site"] != "www" {
					t.Fatalf("answer %v, want www's empty list", m)
				}
			}
		})
	}

	// A failover: n1 is expected, and reports the version.
	src["direct"].SetDown("www", "a1", true)
	for range 3 {
		e.RunRound(ctx)
	}
	c := api.NewClient(srv.URL, "op")
	list, err := c.Failovers(ctx, "www", 1)
	if err != nil || len(list.Failovers) != 1 {
		t.Fatalf("%v %+v", err, list)
	}
	rep := list.Failovers[0]
	if rep.Complete || len(rep.Nodes) != 1 || rep.Nodes[0].Node != "n1" || rep.Nodes[0].Reported {
		t.Fatalf("before n1's report: %+v", rep)
	}
	body := `{"node":"n1","version":` + itoa(rep.Publication) + `,"at":"` + rep.Published.Add(time.Millisecond).Format(time.RFC3339Nano) + `"}`
	if status, m := call(t, srv, "POST", "/v1/publication/applied", "node", body); status != http.StatusNoContent {
		t.Fatalf("ack: %d %v", status, m)
	}
	if list, err = c.Failovers(ctx, "www", 1); err != nil || len(list.Failovers) != 1 {
		t.Fatalf("%v %+v", err, list)
	}
	rep = list.Failovers[0]
	if !rep.Complete || !rep.Nodes[0].Reported || rep.Nodes[0].EdgeSeconds == nil || *rep.Nodes[0].EdgeSeconds != 0.001 {
		t.Fatalf("after n1's report: %+v", rep)
	}
}
