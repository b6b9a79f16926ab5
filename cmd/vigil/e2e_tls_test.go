package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testcerts"
)

// TestEndToEndHTTPSAPI: the real agent serves its API over https; the
// real CLI reaches it with -ca-cert or VIGIL_CACERT, and without either
// says to give one; a renewed certificate is served after SIGHUP.
func TestEndToEndHTTPSAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "vigil e2e CA")
	caFile := ca.WriteCA(t, dir, "ca")
	first := ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}})
	first.Write(t, dir, "api")
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = "1h"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
    tls {
      cert_file = "api.crt"
      key_file  = "api.key"
    }
  }
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}
`, filepath.Join(dir, "data"), binDir)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgentBin(t, filepath.Join(binDir, "vigil"), config)
	if !strings.HasPrefix(p.api, "https://") {
		t.Fatalf("the agent's listen file says %s; want an https:// URL", p.api)
	}
	cli := func(env []string, args ...string) (string, string, int) {
		cmd := exec.Command(filepath.Join(binDir, "vigil"), args...)
		cmd.Env = append(append(os.Environ(), "VIGIL_CACERT=", "VIGIL_ADDR="), env...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		code int
		want string // in stdout when code is 0, else in stderr
	}{
		{"-ca-cert", nil, []string{"status", "-address", p.api, "-ca-cert", caFile, "www"}, 0, "www"},
		{"VIGIL_CACERT", []string{"VIGIL_CACERT=" + caFile}, []string{"status", "-address", p.api, "www"}, 0, "www"},
		{"no CA", nil, []string{"status", "-address", p.api, "www"}, 1, "-ca-cert FILE (or VIGIL_CACERT)"},
		{"http to https", nil, []string{"status", "-address", strings.Replace(p.api, "https://", "http://", 1), "www"}, 1, "serves https"},
		{"a CA file that is no PEM", nil, []string{"status", "-address", p.api, "-ca-cert", config, "www"}, 2, "holds no PEM certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := cli(c.env, c.args...)
			got := out
			if c.code != 0 {
				got = errOut
			}
			if code != c.code || !strings.Contains(got, c.want) {
				t.Fatalf("vigil %v: exit %d, stdout %q, stderr %q; want exit %d with %q", c.args, code, out, errOut, c.code, c.want)
			}
		})
	}

	t.Run("SIGHUP serves a renewed certificate", func(t *testing.T) {
		renewed := ca.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}})
		renewed.Write(t, dir, "api")
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca.PEM)
		host := strings.TrimPrefix(p.api, "https://")
		waitFor(t, "the renewed certificate to be served", 30*time.Second, func() bool {
			conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: pool})
			if err != nil {
				return false
			}
			defer conn.Close()
			return conn.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(renewed.Cert.SerialNumber) == 0
		})
	})
}
