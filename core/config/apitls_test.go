package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/internal/testcerts"
)

// TestAPITLSBlock: the api block's tls block loads its files at load, so
// that validate names a broken certificate, a key of another certificate
// or an unreadable client CA at its line, and warns of an expired one.
func TestAPITLSBlock(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "test CA")
	good := ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}})
	other := ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}})
	expired := ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	good.Write(t, dir, "good")
	expired.Write(t, dir, "expired")
	testcerts.WriteFile(t, filepath.Join(dir, "other.key"), other.KeyPEM)
	ca.WriteCA(t, dir, "ca")
	testcerts.WriteFile(t, filepath.Join(dir, "notpem.txt"), []byte("hello"))

	cases := []struct {
		name, tls string
		// want is a substring of the first error; warn of the first warning.
		want, warn string
		check      func(t *testing.T, c *config.APITLS)
	}{
		{name: "cert and key", tls: `cert_file = "good.crt"
      key_file = "good.key"`, check: func(t *testing.T, c *config.APITLS) {
			if c.CertFile != filepath.Join(dir, "good.crt") || c.KeyFile != filepath.Join(dir, "good.key") || c.ClientCAFile != "" {
				t.Fatalf("tls = %+v; want the paths made absolute from the file's folder", c)
			}
		}},
		{name: "client CA", tls: `cert_file = "good.crt"
      key_file = "good.key"
      client_ca_file = "ca.pem"`, check: func(t *testing.T, c *config.APITLS) {
			if c.ClientCAFile != filepath.Join(dir, "ca.pem") {
				t.Fatalf("client_ca_file = %q", c.ClientCAFile)
			}
		}},
		{name: "no key", tls: `cert_file = "good.crt"`, want: `The argument "key_file" is required`},
		{name: "missing cert", tls: `cert_file = "nope.crt"
      key_file = "good.key"`, want: "nope.crt: no such file"},
		{name: "key of another certificate", tls: `cert_file = "good.crt"
      key_file = "other.key"`, want: "private key does not match public key"},
		{name: "client CA not PEM", tls: `cert_file = "good.crt"
      key_file = "good.key"
      client_ca_file = "notpem.txt"`, want: "holds no PEM certificate"},
		{name: "expired", tls: `cert_file = "expired.crt"
      key_file = "expired.key"`, warn: "expired on"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := "control {\n  api {\n    tls {\n      " + c.tls + "\n    }\n  }\n}\n"
			path := filepath.Join(dir, "vigil.hcl")
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, diags := config.Parse(path, []byte(src))
			if c.want != "" {
				if !diags.HasErrors() || !strings.Contains(diags.Errs()[0].Error(), c.want) {
					t.Fatalf("diagnostics %v; want an error with %q", diags, c.want)
				}
				if !strings.Contains(diags.Errs()[0].Error(), "vigil.hcl:") {
					t.Fatalf("error %v does not name the file and line", diags.Errs()[0])
				}
				if strings.Contains(diags.Error(), "PRIVATE KEY") {
					t.Fatal("an error shows the key")
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if c.warn != "" {
				found := false
				for _, d := range diags {
					found = found || (d.Severity == hcl.DiagWarning && strings.Contains(d.Detail, c.warn))
				}
				if !found {
					t.Fatalf("diagnostics %v; want a warning with %q", diags, c.warn)
				}
			}
			if cfg.Control.API.TLS == nil {
				t.Fatal("no TLS in the API's configuration")
			}
			if c.check != nil {
				c.check(t, cfg.Control.API.TLS)
			}
		})
	}
}

// TestEtcdTLSAttributes: the etcd store's TLS files load at load, a
// client certificate needs its key, and an http:// endpoint beside TLS is
// refused at the endpoints' line.
func TestEtcdTLSAttributes(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "etcd CA")
	ca.WriteCA(t, dir, "ca")
	ca.Issue(t, testcerts.Options{Names: []string{"vigil"}, Client: true}).Write(t, dir, "client")
	for _, c := range []struct{ name, attrs, want string }{
		{"all three", `endpoints = ["https://127.0.0.1:2379"]
    ca_file = "ca.pem"
    cert_file = "client.crt"
    key_file = "client.key"`, ""},
		{"host:port with a CA", `endpoints = ["127.0.0.1:2379"]
    ca_file = "ca.pem"`, ""},
		{"http:// with TLS", `endpoints = ["http://127.0.0.1:2379"]
    ca_file = "ca.pem"`, "write https://127.0.0.1:2379 or host:port"},
		{"a certificate without its key", `endpoints = ["127.0.0.1:2379"]
    cert_file = "client.crt"`, "Set both cert_file and key_file"},
		{"a CA that is no PEM", `endpoints = ["127.0.0.1:2379"]
    ca_file = "client.key"`, "holds no PEM certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "control {\n  store \"etcd\" {\n    " + c.attrs + "\n  }\n}\n"
			cfg, diags := config.Parse(filepath.Join(dir, "vigil.hcl"), []byte(src))
			if c.want == "" {
				if diags.HasErrors() {
					t.Fatal(diags)
				}
				if s := cfg.Control.Store; s.CAFile != filepath.Join(dir, "ca.pem") {
					t.Fatalf("ca_file %q; want it made absolute", s.CAFile)
				}
				return
			}
			if !diags.HasErrors() || !strings.Contains(diags.Error(), c.want) {
				t.Fatalf("diagnostics %v; want an error with %q", diags, c.want)
			}
		})
	}
}
