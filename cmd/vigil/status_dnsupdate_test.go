package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
)

// TestStatusCardDNSUpdate: the card's dns update line says each state
// in words, with the error and the failures of a failing update.
func TestStatusCardDNSUpdate(t *testing.T) {
	now := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	at := now.Add(-42 * time.Second)
	tests := []struct {
		name string
		d    *api.DNSUpdateView
		want string
	}{
		{"none", nil, ""},
		{"ok", &api.DNSUpdateView{Name: "www.example.net.", State: api.DNSUpdateOK, Version: 12, At: &at},
			"  dns update: www.example.net. ok, publication v12 pushed 42s ago\n"},
		{"failing", &api.DNSUpdateView{Name: "www.example.net.", State: api.DNSUpdateFailing, Version: 13, At: &at, Failures: 2, Error: "UPDATE www.example.net. refused by 192.0.2.53:53: REFUSED"},
			"  dns update: www.example.net. FAILING (publication v13, 42s ago; 2 failed updates so far): UPDATE www.example.net. refused by 192.0.2.53:53: REFUSED\n"},
		{"conflict", &api.DNSUpdateView{Name: "www.example.net.", State: api.DNSUpdateConflict, Version: 14, At: &at, Failures: 1, Error: "conflict: changed by hand?"},
			"  dns update: www.example.net. CONFLICT (publication v14, 42s ago; 1 failed update so far): conflict: changed by hand?\n"},
		{"pending", &api.DNSUpdateView{Name: "www.example.net.", State: api.DNSUpdatePending},
			"  dns update: www.example.net. not pushed yet\n"},
		{"skipped", &api.DNSUpdateView{Name: "cdn.example.net.", State: api.DNSUpdateSkipped, Error: "the site's origins are host names"},
			"  dns update: cdn.example.net. not pushed: the site's origins are host names\n"},
		{"standby", &api.DNSUpdateView{Name: "www.example.net.", State: api.DNSUpdateStandby},
			"  dns update: www.example.net. pushed by the cluster's leader, not this instance (ask the leader)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			writeCard(&b, &api.SiteView{Site: "www", Hostname: "www.example.net", Level: 1, Failback: "auto", DNSUpdate: tc.d}, now)
			var got string
			for _, line := range strings.SplitAfter(b.String(), "\n") {
				if strings.HasPrefix(line, "  dns update:") {
					got += line
				}
			}
			if got != tc.want {
				t.Errorf("dns update line %q; want %q\ncard:\n%s", got, tc.want, b.String())
			}
		})
	}
}
