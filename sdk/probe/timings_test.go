package probe

import (
	"context"
	"testing"
	"time"
)

// TestResultTimings: a probe reports the time of each phase it went
// through (0 for those it did not), summing to no more than its duration.
func TestResultTimings(t *testing.T) {
	ca := newTestCA(t)
	cert := leaf(t, ca, []string{siteHost}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	tlsOrigin, plain := newOrigin(t, &cert), newOrigin(t, nil)
	for _, tt := range []struct {
		name    string
		req     Request
		up      bool
		tls     bool
		body    bool
		headers bool
	}{
		{"https", Request{Address: tlsOrigin.url, Path: "/health", RootCAs: ca.pool}, true, true, true, true},
		{"http", Request{Address: plain.url, Path: "/health"}, true, false, true, true},
		{"5xx: no body read", Request{Address: plain.url, Path: "/unavailable"}, false, false, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			req.Host = siteHost
			got, err := Do(context.Background(), req)
			if err != nil || got.Up != tt.up {
				t.Fatalf("probe = %+v, %v", got, err)
			}
			tm := got.Timings
			if tm.DNS != 0 {
				t.Errorf("DNS %v for an IP address", tm.DNS)
			}
			if tm.Connect <= 0 {
				t.Errorf("Connect %v", tm.Connect)
			}
			if (tm.TLS > 0) != tt.tls {
				t.Errorf("TLS %v, want a time: %v", tm.TLS, tt.tls)
			}
			if (tm.Headers > 0) != tt.headers {
				t.Errorf("Headers %v", tm.Headers)
			}
			if (tm.Body > 0) != tt.body {
				t.Errorf("Body %v, want a time: %v", tm.Body, tt.body)
			}
			if sum := tm.DNS + tm.Connect + tm.TLS + tm.Headers + tm.Body; sum > got.Duration {
				t.Errorf("phases sum to %v, more than the probe's %v", sum, got.Duration)
			}
		})
	}
}
