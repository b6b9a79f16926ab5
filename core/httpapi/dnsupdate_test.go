package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

// dnsUpdates is a readmodel.DNSUpdates that knows s001's name only.
type dnsUpdates struct{}

func (dnsUpdates) DNSUpdate(site, hostname string) *api.DNSUpdateView {
	if site != "s001" {
		return nil
	}
	return &api.DNSUpdateView{Name: hostname + ".", State: api.DNSUpdateFailing, Version: 7, Failures: 2, Error: "REFUSED"}
}

// TestSiteViewDNSUpdate: with DNSUpdates set, GET /v1/sites/{site} and
// GET /v1/sites carry the site's dns_update, and leave it out for a site
// it does not update; without it, no view has the field.
func TestSiteViewDNSUpdate(t *testing.T) {
	var b strings.Builder
	b.WriteString("source \"direct\" { plugin = \"vigil-source-direct\" }\n")
	for i := range 2 {
		fmt.Fprintf(&b, "site \"s%03d\" {\n  hostname = \"s%03d.example.com\"\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" {\n    address = \"http://127.0.0.1:2\"\n    level = 2\n  }\n}\n", i, i)
	}
	e, _ := enginetest.Start(t, enginetest.Config(t, b.String()), enginetest.Sources{}, "")
	want := &api.DNSUpdateView{Name: "s001.example.com.", State: api.DNSUpdateFailing, Version: 7, Failures: 2, Error: "REFUSED"}
	for _, tc := range []struct {
		name  string
		opts  httpapi.Options
		s001  *api.DNSUpdateView
		field bool
	}{
		{"with updates", httpapi.Options{Engine: e, DNSUpdates: dnsUpdates{}}, want, true},
		{"without", httpapi.Options{Engine: e}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(httpapi.New(tc.opts))
			t.Cleanup(srv.Close)
			get := func(path string) string {
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var raw json.RawMessage
				if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || resp.StatusCode != 200 {
					t.Fatalf("GET %s: %s %v", path, resp.Status, err)
				}
				return string(raw)
			}
			for _, site := range []string{"s000", "s001"} {
				var v api.SiteView
				body := get("/v1/sites/" + site)
				if err := json.Unmarshal([]byte(body), &v); err != nil {
					t.Fatal(err)
				}
				exp := tc.s001
				if site == "s000" {
					exp = nil
				}
				if fmt.Sprint(v.DNSUpdate) != fmt.Sprint(exp) {
					t.Errorf("%s: dns_update %+v; want %+v", site, v.DNSUpdate, exp)
				}
				if site == "s000" && strings.Contains(body, "dns_update") {
					t.Errorf("%s is not updated but its view has dns_update: %s", site, body)
				}
			}
			list := get("/v1/sites")
			if strings.Contains(list, `"dns_update"`) != tc.field || (tc.field && strings.Count(list, `"dns_update"`) != 1) {
				t.Errorf("GET /v1/sites: dns_update %d times; want it on s001 only (%v)", strings.Count(list, `"dns_update"`), tc.field)
			}
		})
	}
}
