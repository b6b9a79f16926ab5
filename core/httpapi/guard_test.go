package httpapi_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

const guardConfig = `
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

// TestDisableLastEnabledOriginIsGuarded walks the maintenance guard through
// the API, in order: the last enabled origin of the current level is
// refused with the way out, nothing changes, and force gets through.
func TestDisableLastEnabledOriginIsGuarded(t *testing.T) {
	e, _ := enginetest.Start(t, enginetest.Config(t, guardConfig), enginetest.Sources{}, "")
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e, Token: "t", MaxWait: 5 * time.Second}))
	t.Cleanup(srv.Close)
	steps := []struct {
		name, path, body string
		status           int
		code, hint       string
	}{
		{"first of two", "/v1/sites/www/origins/a1/disable", "", 200, "", ""},
		{"last of the level refused", "/v1/sites/www/origins/a2/disable", "", 409, "last_enabled_origin", "vigil switch www 2"},
		{"force=false is no force", "/v1/sites/www/origins/a2/disable?force=false", "", 409, "last_enabled_origin", "-force www a2"},
		{"forced by query", "/v1/sites/www/origins/a2/disable?force=true", "", 200, "", ""},
		{"enable a1", "/v1/sites/www/origins/a1/enable", "", 200, "", ""},
		{"enable a2", "/v1/sites/www/origins/a2/enable", "", 200, "", ""},
		{"switch to 2", "/v1/sites/www/switch", `{"level":2}`, 200, "", ""},
		{"the only origin of level 2 refused, the way out is up", "/v1/sites/www/origins/b1/disable", "", 409, "last_enabled_origin", "vigil switch www 1"},
		{"another level is not guarded", "/v1/sites/www/origins/a1/disable", "", 200, "", ""},
		{"forced by body", "/v1/sites/www/origins/b1/disable", `{"force": true}`, 200, "", ""},
		{"already disabled is not refused", "/v1/sites/www/origins/b1/disable", "", 200, "", ""},
	}
	for _, st := range steps {
		before := e.Views().Site("www")
		status, body := call(t, srv, "POST", st.path, "t", st.body)
		errBody, _ := body["error"].(map[string]any)
		code, _ := errBody["code"].(string)
		hint, _ := errBody["hint"].(string)
		if status != st.status || code != st.code || !strings.Contains(hint, st.hint) {
			t.Fatalf("%s: %d %v, want %d %q with hint %q", st.name, status, body, st.status, st.code, st.hint)
		}
		if st.status == 409 {
			after := e.Views().Site("www")
			for name, o := range before.Origins {
				if after.Origins[name].State != o.State {
					t.Fatalf("%s: a refused disable changed %s from %s to %s", st.name, name, o.State, after.Origins[name].State)
				}
			}
		}
	}
	if v := e.Views().Site("www"); v.Origins["b1"].State != "disabled" || v.Origins["a1"].State != "disabled" || v.Origins["a2"].State == "disabled" {
		t.Fatalf("end state: %+v", v.Origins)
	}
}
