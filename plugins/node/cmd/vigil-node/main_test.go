package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// captureAgent makes run stop at the agent (with errStop) and returns the
// config it would have started.
func captureAgent(t *testing.T) *nodeagent.Config {
	got := &nodeagent.Config{}
	prev := newAgent
	t.Cleanup(func() { newAgent = prev })
	newAgent = func(cfg nodeagent.Config) (*nodeagent.Agent, error) {
		*got = cfg
		return nil, errStop
	}
	return got
}

// -origin-ca makes the proxy and the probes trust origins behind a private
// CA: through the proxy built from the flag's config, a GET reaches an
// https origin whose certificate the system's roots refuse. A missing file
// or one without a certificate is refused with the flag's name.
func TestOriginCAFlag(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "private origin")
	}))
	t.Cleanup(origin.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "origins-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: origin.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	snap := &publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
		Origins: []publication.Origin{{Name: "a1", Address: origin.URL, State: "healthy"}}}}}
	get := func(t *testing.T, opts proxy.Options) int {
		t.Helper()
		p, err := proxy.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		p.SetSnapshot(snap)
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://www.example.com/", nil))
		if rec.Code == http.StatusOK && rec.Body.String() != "private origin" {
			t.Fatalf("answer %q", rec.Body.String())
		}
		return rec.Code
	}

	t.Run("without, the origin is refused", func(t *testing.T) {
		got := captureAgent(t)
		if err := run([]string{"-proxy-listen", "127.0.0.1:0"}); !errors.Is(err, errStop) {
			t.Fatalf("run: %v", err)
		}
		if got.ProbeRootCAs != nil {
			t.Error("probe roots set without -origin-ca")
		}
		if code := get(t, got.Proxy); code == http.StatusOK {
			t.Fatal("the system's roots accepted the test origin's certificate: the test proves nothing")
		}
	})
	t.Run("with, the proxy and the probes trust it", func(t *testing.T) {
		got := captureAgent(t)
		if err := run([]string{"-proxy-listen", "127.0.0.1:0", "-origin-ca", caFile}); !errors.Is(err, errStop) {
			t.Fatalf("run: %v", err)
		}
		if code := get(t, got.Proxy); code != http.StatusOK {
			t.Fatalf("status %d through the proxy, want 200", code)
		}
		if got.ProbeRootCAs == nil || got.ProbeRootCAs != got.Proxy.TLS.RootCAs {
			t.Fatal("the probes do not get the same roots")
		}
		if _, err := origin.Certificate().Verify(x509.VerifyOptions{Roots: got.ProbeRootCAs, DNSName: "www.example.com"}); err != nil {
			t.Fatalf("the probes' roots refuse the origin: %v", err)
		}
	})
	noPEM := filepath.Join(dir, "not-a-ca.pem")
	if err := os.WriteFile(noPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, file, want string }{
		{"missing file", filepath.Join(dir, "absent.pem"), "-origin-ca: open"},
		{"no certificate", noPEM, "no PEM certificate in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			captureAgent(t)
			err := run([]string{"-origin-ca", tc.file})
			if err == nil || errors.Is(err, errStop) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
