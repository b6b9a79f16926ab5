package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

const cfg = `
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

func server(t *testing.T, token string, readsNeedToken bool) (*httptest.Server, *engine.Engine) {
	t.Helper()
	e, _ := enginetest.Start(t, enginetest.Config(t, cfg), enginetest.Sources{}, "")
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e, Token: token, ReadsNeedToken: readsNeedToken, MaxWait: 5 * time.Second}))
	t.Cleanup(srv.Close)
	return srv, e
}

func call(t *testing.T, srv *httptest.Server, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(b) > 0 && resp.Header.Get("Content-Type") == "application/json" {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: not JSON: %s", method, path, b)
		}
	}
	return resp.StatusCode, m
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func TestAuthAndBadInput(t *testing.T) {
	srv, _ := server(t, "s3cret", false)
	tests := []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"read open", "GET", "/v1/sites", "", "", 200, ""},
		{"site", "GET", "/v1/sites/www", "", "", 200, ""},
		{"unknown site", "GET", "/v1/sites/nope", "", "", 404, "unknown_site"},
		{"mutation without token", "POST", "/v1/sites/www/switch", "", `{"level":2}`, 401, "token_missing"},
		{"mutation with a wrong token", "POST", "/v1/sites/www/switch", "wrong", `{"level":2}`, 401, "token_refused"},
		{"bad JSON", "POST", "/v1/sites/www/switch", "s3cret", `{"level":`, 400, "bad_request"},
		{"unknown field", "POST", "/v1/sites/www/switch", "s3cret", `{"levle":2}`, 400, "bad_request"},
		{"missing level", "POST", "/v1/sites/www/switch", "s3cret", `{}`, 400, "bad_request"},
		{"level not a number", "POST", "/v1/sites/www/switch", "s3cret", `{"level":"two"}`, 400, "bad_request"},
		{"unknown level", "POST", "/v1/sites/www/switch", "s3cret", `{"level":7}`, 400, "unknown_level"},
		{"switch unknown site", "POST", "/v1/sites/nope/switch", "s3cret", `{"level":1}`, 404, "unknown_site"},
		{"unknown origin", "POST", "/v1/sites/www/origins/zz/disable", "s3cret", ``, 404, "unknown_origin"},
		{"unknown origin action", "POST", "/v1/sites/www/origins/a1/reboot", "s3cret", ``, 404, "not_found"},
		{"probe without token", "POST", "/v1/sites/www/probe", "", ``, 401, "token_missing"},
		{"probe with a wrong token", "POST", "/v1/sites/www/probe", "wrong", ``, 401, "token_refused"},
		{"disable bad force", "POST", "/v1/sites/www/origins/a1/disable?force=maybe", "s3cret", ``, 400, "bad_request"},
		{"disable bad body", "POST", "/v1/sites/www/origins/a1/disable", "s3cret", `{"forse":true}`, 400, "bad_request"},
		{"probe unknown site", "POST", "/v1/sites/nope/probe", "s3cret", ``, 404, "unknown_site"},
		{"probe", "POST", "/v1/sites/www/probe", "s3cret", ``, 200, ""},
		{"switch", "POST", "/v1/sites/www/switch", "s3cret", `{"level":2}`, 200, ""},
		{"disable", "POST", "/v1/sites/www/origins/a1/disable", "s3cret", ``, 200, ""},
		{"events bad after", "GET", "/v1/events?after=-1", "", "", 400, "bad_request"},
		{"events bad limit", "GET", "/v1/events?limit=999999", "", "", 400, "bad_request"},
		{"events bad wait", "GET", "/v1/events?wait=soon", "", "", 400, "bad_request"},
		{"events unknown site", "GET", "/v1/events?site=nope", "", "", 404, "unknown_site"},
		{"events", "GET", "/v1/events?site=www", "", "", 200, ""},
		{"unknown endpoint", "GET", "/v1/nothing", "", "", 404, "not_found"},
		{"healthz", "GET", "/healthz", "", "", 200, ""},
		{"metrics", "GET", "/metrics", "", "", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := call(t, srv, tt.method, tt.path, tt.token, tt.body)
			if status != tt.status || errCode(body) != tt.code {
				t.Fatalf("%d %v, want %d %q", status, body, tt.status, tt.code)
			}
			if tt.code != "" {
				msg := body["error"].(map[string]any)["message"].(string)
				if msg == "" || strings.Contains(msg, "s3cret") {
					t.Fatalf("error message %q must name the problem and never the token", msg)
				}
			}
		})
	}
	// The actions were applied, with their events.
	status, body := call(t, srv, "GET", "/v1/events?site=www", "", "")
	evs := body["events"].([]any)
	if status != 200 || len(evs) != 2 {
		t.Fatalf("events %v", body)
	}
}

func TestNoTokenRefusesMutations(t *testing.T) {
	srv, _ := server(t, "", false)
	status, body := call(t, srv, "POST", "/v1/sites/www/switch", "", `{"level":2}`)
	if status != 403 || errCode(body) != "mutations_disabled" {
		t.Fatalf("%d %v", status, body)
	}
}

func TestReadsNeedToken(t *testing.T) {
	srv, _ := server(t, "s3cret", true)
	if status, _ := call(t, srv, "GET", "/v1/sites", "", ""); status != 401 {
		t.Fatalf("read without token: %d", status)
	}
	if status, _ := call(t, srv, "GET", "/v1/sites", "s3cret", ""); status != 200 {
		t.Fatalf("read with token: %d", status)
	}
	if status, _ := call(t, srv, "GET", "/healthz", "", ""); status != 200 {
		t.Fatalf("healthz must stay open: %d", status)
	}
}

func TestPublicationLongPoll(t *testing.T) {
	srv, e := server(t, "s3cret", false)
	cur := e.Hub().Current().Version
	// Nothing newer: 304 once the wait ends.
	if status, _ := call(t, srv, "GET", "/v1/publication?after="+itoa(cur)+"&wait=50ms", "", ""); status != 304 {
		t.Fatalf("want 304, got %d", status)
	}
	type result struct {
		status int
		body   map[string]any
	}
	done := make(chan result, 1)
	go func() {
		s, b := call(t, srv, "GET", "/v1/publication?after="+itoa(cur)+"&wait=5s", "", "")
		done <- result{s, b}
	}()
	// A follower ahead of this control plane (another history) gets the
	// current snapshot at once.
	if status, body := call(t, srv, "GET", "/v1/publication?after="+itoa(cur+100)+"&wait=5s", "", ""); status != 200 || uint64(body["version"].(float64)) != cur {
		t.Fatalf("a follower from another history: %d %v", status, body)
	}
	// Whether the poll is parked yet or not, it must see the switch.
	if _, err := e.Switch(context.Background(), "www", 2, "t"); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.status != 200 || uint64(r.body["version"].(float64)) <= cur {
		t.Fatalf("long-poll: %d %v", r.status, r.body)
	}
	sites := r.body["sites"].([]any)
	if lvl := sites[0].(map[string]any)["level"].(float64); lvl != 2 {
		t.Fatalf("published level %v, want 2", lvl)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// reportingSource is a fake vote source that also reports nodes.
type reportingSource struct{ *enginetest.Source }

func (reportingSource) Status(context.Context) (sdk.Status, error) {
	return sdk.Status{Summary: "1 of 2 nodes online", Items: []sdk.StatusItem{
		{Name: "edge-2", State: "offline"},
		{Name: "edge-1", State: "online", Labels: map[string]string{"pop": "ams"}},
	}}, nil
}

func TestNodes(t *testing.T) {
	t.Run("no source reports nodes", func(t *testing.T) {
		srv, _ := server(t, "", false)
		if status, body := call(t, srv, "GET", "/v1/nodes", "", ""); status != 404 || errCode(body) != "no_status" {
			t.Fatalf("%d %v", status, body)
		}
	})
	t.Run("the node source's nodes", func(t *testing.T) {
		st, err := store.Open(t.TempDir(), 0)
		if err != nil {
			t.Fatal(err)
		}
		e, diags := engine.New(context.Background(), enginetest.Config(t, cfg), engine.Options{Store: st,
			NewSource: func(c *config.Source, _ string, _ hclog.Logger) engine.VoteSource {
				return reportingSource{enginetest.NewSource(c.Name)}
			}})
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		t.Cleanup(func() { e.Close(); st.Close() })
		srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e}))
		t.Cleanup(srv.Close)
		status, body := call(t, srv, "GET", "/v1/nodes", "", "")
		nodes, _ := body["nodes"].([]any)
		offline, _ := body["offline"].([]any)
		if status != 200 || len(nodes) != 1 || len(offline) != 1 {
			t.Fatalf("%d %v", status, body)
		}
		n := nodes[0].(map[string]any)
		if n["id"] != "edge-1" || n["source"] != "direct" || n["labels"].(map[string]any)["pop"] != "ams" {
			t.Fatalf("online node %v", n)
		}
	})
}
