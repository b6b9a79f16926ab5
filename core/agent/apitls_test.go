package agent_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/agent"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/internal/testcerts"
	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// tlsAgent is an agent whose API serves https with dir/api.crt and
// dir/api.key (and dir/clients.pem as client_ca_file when clientCA).
type tlsAgent struct {
	dir, listen string
	clientCA    bool
	a           *agent.Agent
}

func (f *tlsAgent) config(t *testing.T, withTLS bool) *config.Config {
	t.Helper()
	block := ""
	if withTLS {
		block = "tls {\n      cert_file = \"api.crt\"\n      key_file = \"api.key\"\n"
		if f.clientCA {
			block += "      client_ca_file = \"clients.pem\"\n"
		}
		block += "    }"
	}
	src := fmt.Sprintf(`
control {
  round_interval = "1h"
  data_dir       = %q
  api {
    listen     = %q
    token_file = %q
    %s
  }
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`, filepath.Join(f.dir, "data"), f.listen, filepath.Join(f.dir, "token"), block)
	path := filepath.Join(f.dir, "vigil.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Parse(path, []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return cfg
}

func startTLSAgent(t *testing.T, dir string, clientCA bool) *tlsAgent {
	t.Helper()
	f := &tlsAgent{dir: dir, listen: testnet.Addr(t), clientCA: clientCA}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := agent.Start(f.config(t, true), agent.Options{
		Logger:    hclog.New(&hclog.LoggerOptions{Output: &sdktest.LogBuffer{}, Level: hclog.Debug}),
		NewSource: enginetest.Sources{}.Factory(), ListenFile: filepath.Join(dir, "listen"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })
	f.a = a
	return f
}

// sites reads GET /v1/sites through an https client with files, and the
// serial of the certificate the API showed.
func sites(t *testing.T, addr string, files api.TLSFiles) (string, error) {
	t.Helper()
	c := api.NewClient(addr, "tok")
	cfg, err := files.Config()
	if err != nil {
		t.Fatal(err)
	}
	var serial string
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		serial = cs.PeerCertificates[0].SerialNumber.String()
		return nil
	}
	c.SetTLS(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = c.Sites(ctx, api.SitesQuery{})
	return serial, err
}

// TestAPIServesHTTPS: with control { api { tls } } the API serves https;
// a client trusting another CA, a certificate that expired or names
// another host, and a plain http client are each refused with a message
// that says what to do; a client certificate is asked for with
// client_ca_file; SIGHUP (Reload) reads a renewed certificate, and a
// reload whose key does not match keeps the old one.
func TestAPIServesHTTPS(t *testing.T) {
	dir := t.TempDir()
	ca, other := testcerts.NewCA(t, "vigil test CA"), testcerts.NewCA(t, "another CA")
	caFile, otherFile := ca.WriteCA(t, dir, "ca"), other.WriteCA(t, dir, "other")
	ca.WriteCA(t, dir, "clients")
	first := ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}})
	first.Write(t, dir, "api")
	f := startTLSAgent(t, dir, false)
	url := "https://" + f.listen

	b, err := os.ReadFile(filepath.Join(dir, "listen"))
	if err != nil || strings.TrimSpace(string(b)) != url {
		t.Fatalf("listen file %q (%v); want %s", b, err, url)
	}
	serial, err := sites(t, url, api.TLSFiles{CAFile: caFile})
	if err != nil {
		t.Fatalf("GET /v1/sites over https with the CA: %v", err)
	}
	if serial != first.Cert.SerialNumber.String() {
		t.Fatalf("the API showed certificate %s; want %s", serial, first.Cert.SerialNumber)
	}
	refused := []struct {
		name  string
		addr  string
		files api.TLSFiles
		want  string
	}{
		{"a CA the client does not trust", url, api.TLSFiles{CAFile: otherFile}, "-ca-cert"},
		{"the system's roots only", url, api.TLSFiles{}, "VIGIL_CACERT"},
		{"plain http to https", "http://" + f.listen, api.TLSFiles{}, "use an https:// address"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			if _, err := sites(t, c.addr, c.files); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want one saying %q", err, c.want)
			}
		})
	}

	// Each broken certificate, put in force by a reload as a renewal would.
	broken := []struct {
		name string
		leaf *testcerts.Leaf
		want string
	}{
		{"expired", ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}), "has expired"},
		{"for another name", ca.Issue(t, testcerts.Options{Names: []string{"vigil.example.net"}}), "not for the address used"},
	}
	for _, c := range broken {
		t.Run(c.name, func(t *testing.T) {
			c.leaf.Write(t, dir, "api")
			if _, err := f.a.Reload(f.config(t, true)); err != nil {
				t.Fatal(err)
			}
			if _, err := sites(t, url, api.TLSFiles{CAFile: caFile}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want one saying %q", err, c.want)
			}
		})
	}

	t.Run("a renewed certificate after SIGHUP", func(t *testing.T) {
		renewed := ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}})
		renewed.Write(t, dir, "api")
		res, err := f.a.Reload(f.config(t, true))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(res.Applied, ";"), "tls") {
			t.Errorf("applied %v: the certificate is not named", res.Applied)
		}
		serial, err := sites(t, url, api.TLSFiles{CAFile: caFile})
		if err != nil || serial != renewed.Cert.SerialNumber.String() {
			t.Fatalf("after the reload: certificate %s, error %v; want %s", serial, err, renewed.Cert.SerialNumber)
		}
		// A key of another certificate: refused, the renewed one stays.
		// (validate refuses such a file, so the configuration is read
		// before the key is replaced).
		cfg := f.config(t, true)
		testcerts.WriteFile(t, filepath.Join(dir, "api.key"), first.KeyPEM)
		if _, err := f.a.Reload(cfg); err == nil || !strings.Contains(err.Error(), "key") {
			t.Fatalf("reload with a key of another certificate: %v; want refused", err)
		}
		if serial, err := sites(t, url, api.TLSFiles{CAFile: caFile}); err != nil || serial != renewed.Cert.SerialNumber.String() {
			t.Fatalf("after the refused reload: certificate %s, error %v; want the renewed one still", serial, err)
		}
	})
}

// TestAPIAsksForClientCertificates: with client_ca_file a client without
// a certificate, or with one of another CA, is refused with a message
// naming -client-cert; one signed by the client CA is served.
func TestAPIAsksForClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, other := testcerts.NewCA(t, "vigil test CA"), testcerts.NewCA(t, "another CA")
	caFile := ca.WriteCA(t, dir, "ca")
	ca.WriteCA(t, dir, "clients")
	ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}}).Write(t, dir, "api")
	good, goodKey := ca.Issue(t, testcerts.Options{Names: []string{"alice"}, Client: true}).Write(t, dir, "alice")
	bad, badKey := other.Issue(t, testcerts.Options{Names: []string{"mallory"}, Client: true}).Write(t, dir, "mallory")
	f := startTLSAgent(t, dir, true)
	url := "https://" + f.listen
	for _, c := range []struct {
		name  string
		files api.TLSFiles
		want  string // "" for served
	}{
		{"without a certificate", api.TLSFiles{CAFile: caFile}, "-client-cert"},
		{"with another CA's", api.TLSFiles{CAFile: caFile, CertFile: bad, KeyFile: badKey}, "-client-cert"},
		{"with the client CA's", api.TLSFiles{CAFile: caFile, CertFile: good, KeyFile: goodKey}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := sites(t, url, c.files)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want one saying %q", err, c.want)
			}
		})
	}
	t.Run("turned off by a reload", func(t *testing.T) {
		if _, err := f.a.Reload(f.config(t, false)); err != nil {
			t.Fatal(err)
		}
		if _, err := sites(t, "http://"+f.listen, api.TLSFiles{}); err != nil {
			t.Fatalf("plain http after tls was removed: %v", err)
		}
	})
}

// TestScopedTokensFromTheEnvironment: read_token_env and node_token_env
// are read at start; two scopes with one value are refused.
func TestScopedTokensFromTheEnvironment(t *testing.T) {
	f := &fixture{dir: t.TempDir()}
	t.Setenv("VIGIL_T_READ", "reader")
	t.Setenv("VIGIL_T_NODE", "edge")
	_, addr := startWith(t, f, "")
	cfg := f.config(t, addr, "")
	cfg.Control.API.ReadTokenEnv, cfg.Control.API.NodeTokenEnv = "VIGIL_T_READ", "VIGIL_T_NODE"
	cfg.Control.API.ReadAccess = "token"
	if _, err := f.a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	c := api.NewClient("http://"+cfg.Control.API.Listen, "edge")
	ctx := context.Background()
	if _, _, err := c.Publication(ctx, 0, 0); err != nil {
		t.Fatalf("the node token cannot read the publication: %v", err)
	}
	if _, err := c.Switch(ctx, "www", 2); err == nil || !strings.Contains(err.Error(), "operator scope") {
		t.Fatalf("switch with the node token: %v; want refused for lack of the operator scope", err)
	}
	t.Setenv("VIGIL_T_NODE", "reader")
	if _, err := f.a.Reload(cfg); err == nil || !strings.Contains(err.Error(), "same token") {
		t.Fatalf("reload with one token for two scopes: %v; want refused", err)
	}
}
