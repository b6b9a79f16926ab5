package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/internal/testcerts"
	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// TestControlPlaneTLSFlags: -control-plane-ca, -control-plane-cert and
// -control-plane-key make the node follow an https API that asks for a
// client certificate; without the CA, or without the client certificate,
// the node serves nothing and its log says what to do. Bad flags are
// refused with the flag's name.
func TestControlPlaneTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca, clientCA, other := testcerts.NewCA(t, "api CA"), testcerts.NewCA(t, "client CA"), testcerts.NewCA(t, "other CA")
	srvCert := ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}})
	pair, err := tls.X509KeyPair(srvCert.CertPEM, srvCert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	clientPool := x509.NewCertPool()
	clientPool.AppendCertsFromPEM(clientCA.PEM)
	api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/publication" || r.Header.Get("Authorization") != "Bearer node-token" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(publication.Snapshot{Version: 4, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 2}}})
	}))
	api.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: clientPool, ClientAuth: tls.RequireAndVerifyClientCert}
	api.StartTLS()
	t.Cleanup(api.Close)
	caFile, otherFile := ca.WriteCA(t, dir, "ca"), other.WriteCA(t, dir, "other")
	certFile, keyFile := clientCA.Issue(t, testcerts.Options{Names: []string{"edge-1"}, Client: true}).Write(t, dir, "client")
	t.Setenv("NODE_API_TOKEN", "node-token")

	// follow runs the node with args until it serves a publication (true)
	// or its log has the line want (false).
	follow := func(t *testing.T, want string, args ...string) bool {
		t.Helper()
		var cfg nodeagent.Config
		captured := captureAgent(t)
		if err := run(append([]string{"-control-plane", api.URL, "-control-plane-token-env", "NODE_API_TOKEN"}, args...)); !errors.Is(err, errStop) {
			t.Fatalf("run: %v", err)
		}
		cfg = *captured
		log := &syncBuffer{}
		cfg.Log = hclog.New(&hclog.LoggerOptions{Output: log, Level: hclog.Debug})
		served := make(chan uint64, 8)
		cfg.OnEvent = func(e nodeagent.Event) {
			if e.Kind == nodeagent.EventPublication {
				served <- e.Version
			}
		}
		cfg.MinBackoff, cfg.MaxBackoff = 20*time.Millisecond, 100*time.Millisecond
		a, err := nodeagent.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = a.Run(ctx) }()
		defer func() { cancel(); <-done }()
		deadline := time.After(30 * time.Second) // a hang guard only
		for {
			select {
			case v := <-served:
				if v != 4 {
					t.Fatalf("served version %d, want 4", v)
				}
				return true
			case <-deadline:
				t.Fatalf("neither a publication nor %q in the log:\n%s", want, log.String())
			case <-time.After(20 * time.Millisecond):
				if want != "" && strings.Contains(log.String(), want) {
					return false
				}
			}
		}
	}
	tests := []struct {
		name   string
		args   []string
		want   string // the log line's words when refused
		served bool
	}{
		{"CA and client certificate", []string{"-control-plane-ca", caFile, "-control-plane-cert", certFile, "-control-plane-key", keyFile}, "", true},
		{"wrong CA", []string{"-control-plane-ca", otherFile, "-control-plane-cert", certFile, "-control-plane-key", keyFile},
			"signed by a CA this node does not trust: give the CA's certificate with -control-plane-ca", false},
		{"no client certificate", []string{"-control-plane-ca", caFile},
			"asks for a client certificate signed by its client_ca_file: give one with -control-plane-cert and -control-plane-key", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := follow(t, tt.want, tt.args...); got != tt.served {
				t.Fatalf("served = %v, want %v", got, tt.served)
			}
		})
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing CA file", []string{"-control-plane-ca", filepath.Join(dir, "absent.pem")}, "-control-plane-ca: open"},
		{"CA file without a certificate", []string{"-control-plane-ca", keyFile}, "no PEM certificate in it"},
		{"cert without key", []string{"-control-plane-cert", certFile}, "give both -control-plane-cert and -control-plane-key"},
		{"key of another certificate", []string{"-control-plane-cert", certFile, "-control-plane-key", filepath.Join(dir, "absent.key")}, "-control-plane-cert/-control-plane-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			captureAgent(t)
			err := run(append([]string{"-control-plane", api.URL}, tc.args...))
			if err == nil || errors.Is(err, errStop) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
