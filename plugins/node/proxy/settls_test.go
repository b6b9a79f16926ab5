package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// TestSetTLS: an https origin behind a CA the proxy does not trust is a
// 502; after SetTLS with that CA, the next request is served; SetTLS back
// to the system's roots makes new connections refuse it again (the idle
// one was closed).
func TestSetTLS(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("tls origin"))
	}))
	t.Cleanup(origin.Close)
	h := newHarness(t, Options{Retries: NoRetries}, snapshot(publication.Origin{Name: "a1", Address: origin.URL, State: "healthy"}))
	if resp, _ := h.do(t, "GET", "www.example.com", ""); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("before SetTLS: %d; want 502 (the origin's CA is not trusted)", resp.StatusCode)
	}
	pool := x509.NewCertPool()
	pool.AddCert(origin.Certificate())
	// (httptest's certificate names *.example.com: the site's hostname is
	// the name the proxy verifies.)
	h.p.SetTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool})
	if resp, body := h.do(t, "GET", "www.example.com", ""); resp.StatusCode != 200 || body != "tls origin" {
		t.Fatalf("after SetTLS with the origin's CA: %d %q; want 200", resp.StatusCode, body)
	}
	h.p.SetTLS(nil)
	if resp, _ := h.do(t, "GET", "www.example.com", ""); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("after SetTLS(nil): %d; want 502 again (a new connection, the system's roots)", resp.StatusCode)
	}
}
