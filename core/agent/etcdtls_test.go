package agent_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/agent"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
	"github.com/vigilcdn/vigil/internal/testcerts"
	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// TestEtcdOverTLS: an agent whose store block names ca_file, cert_file
// and key_file keeps its state in an etcd that requires client
// certificates (--client-cert-auth); with a client certificate of another
// CA it does not start, and says that etcd refused its certificate.
func TestEtcdOverTLS(t *testing.T) {
	etcdtest.Require(t)
	dir := t.TempDir()
	ca, other := testcerts.NewCA(t, "etcd CA"), testcerts.NewCA(t, "another CA")
	caFile := ca.WriteCA(t, dir, "ca")
	srvCert, srvKey := ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}}).Write(t, dir, "etcd")
	cliCert, cliKey := ca.Issue(t, testcerts.Options{Names: []string{"vigil"}, Client: true}).Write(t, dir, "vigil")
	badCert, badKey := other.Issue(t, testcerts.Options{Names: []string{"vigil"}, Client: true}).Write(t, dir, "mallory")
	etcd := etcdtest.StartTLS(t, etcdtest.TLSFiles{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: caFile,
		ClientCertFile: cliCert, ClientKeyFile: cliKey, CA: ca.PEM})

	start := func(t *testing.T, cert, key string) (*agent.Agent, string, error) {
		t.Helper()
		listen := testnet.Addr(t)
		certLines := ""
		if cert != "" {
			certLines = fmt.Sprintf("cert_file = %q\n    key_file = %q", cert, key)
		}
		src := fmt.Sprintf(`
control {
  round_interval = "1h"
  data_dir       = %q
  api {
    listen    = %q
    token_env = "VIGIL_TLS_TEST_TOKEN"
  }
  store "etcd" {
    endpoints    = [%q]
    lease_ttl    = "2s"
    dial_timeout = "2s"
    ca_file      = %q
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
`, t.TempDir(), listen, etcd.Endpoint, caFile, certLines)
		cfg, diags := config.Parse(filepath.Join(dir, "vigil.hcl"), []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		a, err := agent.Start(cfg, agent.Options{
			Logger:    hclog.New(&hclog.LoggerOptions{Output: &sdktest.LogBuffer{}, Level: hclog.Debug}),
			NewSource: enginetest.Sources{}.Factory(),
		})
		if err == nil {
			t.Cleanup(func() { _ = a.Stop() })
		}
		return a, "http://" + listen, err
	}
	t.Setenv("VIGIL_TLS_TEST_TOKEN", "tok")

	t.Run("a client certificate of the CA", func(t *testing.T) {
		_, url, err := start(t, cliCert, cliKey)
		if err != nil {
			t.Fatal(err)
		}
		c := api.NewClient(url, "tok")
		// A switch is committed to etcd before it is answered: it is the
		// proof that the store works over TLS. The instance leads once it
		// won the election; wait for that.
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = c.Switch(ctx, "www", 2)
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the switch was never accepted: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		resp, err := etcd.Client(t).Get(context.Background(), "/vigil/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count == 0 {
			t.Fatalf("etcd holds %v keys under /vigil/ (%v); want the agent's state", resp, err)
		}
	})
	for _, c := range []struct{ name, cert, key, want string }{
		{"a client certificate of another CA", badCert, badKey, "refused this instance's client certificate"},
		{"no client certificate", "", "", "asks for a client certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := start(t, c.cert, c.key)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("start: %v; want an error saying %q", err, c.want)
			}
			t.Log(err)
		})
	}
}
