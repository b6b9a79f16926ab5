package httpapi_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

// TestTokenScopes: the operator's token does everything, a read token
// reads everything and changes nothing, a node token reads only the
// publication and the sites; each refusal names the scope it lacks, and
// a single operator token keeps today's meaning.
func TestTokenScopes(t *testing.T) {
	e, _ := enginetest.Start(t, enginetest.Config(t, cfg), enginetest.Sources{}, "")
	h := httpapi.New(httpapi.Options{Engine: e, Token: "op", ReadToken: "reader", NodeToken: "edge", ReadsNeedToken: true, MaxWait: 5 * time.Second})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	const (
		ok = iota
		scope
		missing
		refused
	)
	cases := []struct {
		method, path, body string
		want               map[string]int // token -> outcome
	}{
		{"GET", "/v1/publication", "", map[string]int{"op": ok, "reader": ok, "edge": ok, "": missing, "nope": refused}},
		{"GET", "/v1/sites", "", map[string]int{"op": ok, "reader": ok, "edge": ok, "": missing}},
		{"GET", "/v1/sites/www", "", map[string]int{"op": ok, "reader": ok, "edge": ok}},
		{"GET", "/v1/events", "", map[string]int{"op": ok, "reader": ok, "edge": scope, "": missing}},
		{"GET", "/metrics", "", map[string]int{"op": ok, "reader": ok, "edge": scope}},
		{"GET", "/v1/nodes", "", map[string]int{"reader": ok, "edge": scope}},
		{"POST", "/v1/sites/www/switch", `{"level": 1}`, map[string]int{"op": ok, "reader": scope, "edge": scope, "": missing, "nope": refused}},
		{"POST", "/v1/sites/www/origins/b1/disable", "", map[string]int{"reader": scope, "edge": scope}},
	}
	for _, c := range cases {
		for token, want := range c.want {
			t.Run(c.method+" "+c.path+" with "+token, func(t *testing.T) {
				code, body := call(t, srv, c.method, c.path, token, c.body)
				switch want {
				case ok:
					if code == 401 || code == 403 {
						t.Fatalf("%d %v; want it past the token check", code, body)
					}
				case scope:
					msg, _ := body["error"].(map[string]any)["message"].(string)
					if code != 403 || body["error"].(map[string]any)["code"] != "token_scope" || !strings.Contains(msg, "needs the") {
						t.Fatalf("%d %v; want 403 token_scope naming the scope it needs", code, body)
					}
					if strings.Contains(msg, token) {
						t.Fatalf("the refusal shows the token: %s", msg)
					}
				case missing:
					if code != 401 || body["error"].(map[string]any)["code"] != "token_missing" {
						t.Fatalf("%d %v; want 401 token_missing", code, body)
					}
				case refused:
					if code != 401 || body["error"].(map[string]any)["code"] != "token_refused" {
						t.Fatalf("%d %v; want 401 token_refused", code, body)
					}
				}
			})
		}
	}
	t.Run("open reads", func(t *testing.T) {
		h.SetTokens(httpapi.Tokens{Operator: "op", Read: "reader", Node: "edge"}, false)
		if code, body := call(t, srv, "GET", "/v1/events", "", ""); code != 200 {
			t.Fatalf("GET /v1/events without a token while reads are open: %d %v", code, body)
		}
		if code, _ := call(t, srv, "POST", "/v1/sites/www/switch", "edge", `{"level": 1}`); code != 403 {
			t.Fatalf("a node token switched while reads are open: %d", code)
		}
	})
}
