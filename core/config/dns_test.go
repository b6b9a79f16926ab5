package config_test

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
)

// TestDNSTTLWarning: a TTL longer than a site's detection time warns,
// for publish "dns" and publish "dns_update" alike, naming the detection
// time computed; transition_ttl defaults to half of ttl.
func TestDNSTTLWarning(t *testing.T) {
	const site = `control { round_interval = "10s" }
source "s" { plugin = "p" }
site "www" {
  hostname = "www.example.com"
  health_check { unhealthy_threshold = 3 }
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}
`
	tests := []struct {
		name, block, want string
	}{
		{"dns, ttl too long", `publish "dns" {
  listen = "127.0.0.1:5353"
  zone   = "example.com."
  ttl    = 60
}`, `publish "dns": ttl is 1m0s but site "www" detects a failure in 30s (unhealthy_threshold 3 x round_interval 10s)`},
		{"dns_update, ttl too long", `publish "dns_update" {
  server = "127.0.0.1:53"
  zone   = "example.com."
  ttl    = 45
}`, `publish "dns_update": ttl is 45s but site "www" detects a failure in 30s`},
		{"dns, ttl within detection", `publish "dns" {
  listen = "127.0.0.1:5353"
  zone   = "example.com."
  ttl    = 30
}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, diags := config.Parse("c.hcl", []byte(site+tc.block+"\n"))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			var got []string
			for _, d := range diags {
				if d.Severity == hcl.DiagWarning && d.Summary == "DNS TTL longer than failure detection" {
					got = append(got, d.Detail)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("warned: %v", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("warnings %q; want one saying %q", got, tc.want)
			}
			if d := cfg.DNS; d != nil && d.TransitionTTL != d.TTL/2 {
				t.Errorf("transition_ttl %d, want half of ttl %d", d.TransitionTTL, d.TTL)
			}
			if d := cfg.DNSUpdate; d != nil && (d.TransitionTTL != d.TTL/2 || d.Server != "127.0.0.1:53" || d.TSIGAlgorithm != "hmac-sha256") {
				t.Errorf("dns_update defaults: %+v", d)
			}
		})
	}
}
