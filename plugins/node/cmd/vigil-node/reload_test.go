package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/internal/testcerts"
	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
)

// fakeReloader records what a reload set.
type fakeReloader struct {
	gateway, controlPlane *tls.Config
	roots                 *x509.CertPool
	calls                 []string
}

func (f *fakeReloader) SetGatewayTLS(tc *tls.Config) {
	f.gateway = tc
	f.calls = append(f.calls, "gateway")
}
func (f *fakeReloader) SetControlPlaneTLS(tc *tls.Config) {
	f.controlPlane = tc
	f.calls = append(f.calls, "control plane")
}
func (f *fakeReloader) SetProbeRootCAs(p *x509.CertPool) {
	f.roots = p
	f.calls = append(f.calls, "origin CA")
}

// TestReloadFiles: a reload sets what loads, keeps what does not (logged
// as an error naming it), and logs one line saying what was re-read.
func TestReloadFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "reload CA")
	good := ca.WriteCA(t, dir, "ca")
	certFile, keyFile := ca.Issue(t, testcerts.Options{Names: []string{"edge-1"}, Client: true}).Write(t, dir, "client")
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmplSrc := filepath.Join(dir, "edge.tmpl")
	if err := os.WriteFile(tmplSrc, []byte("{{.Version}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	templateEdges := func(t *testing.T, spec string) []edge.Driver {
		t.Helper()
		d, err := edgeDrivers(edgeFlags{templates: []string{spec}, haSrvArgs: edge.DefaultHAProxyServerArgs, haTLSArgs: edge.DefaultHAProxyTLSArgs,
			haRemoveAfter: edge.DefaultHAProxyRemoveAfter, haWatch: edge.DefaultHAProxyWatch})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		name      string
		files     reloadFiles
		wantCalls string
		wantLog   []string
	}{
		{"nothing given", reloadFiles{}, "", []string{"nothing to re-read"}},
		{"a template file", reloadFiles{edges: templateEdges(t, tmplSrc+":"+filepath.Join(dir, "edge.conf"))},
			"", []string{"SIGHUP: files re-read; still running", "1 template file(s), applied at once"}},
		{"a built-in template has nothing to re-read", reloadFiles{edges: templateEdges(t, "builtin:nginx:"+filepath.Join(dir, "nginx.conf"))},
			"", []string{"nothing to re-read"}},
		{"every file loads", reloadFiles{tlsCA: good, tlsCert: certFile, tlsKey: keyFile, cpCA: good, originCA: good},
			"gateway,control plane,origin CA", []string{"SIGHUP: files re-read; still running", "gateway TLS", "control plane TLS", "origin CA"}},
		{"a bad control plane CA is kept", reloadFiles{tlsCA: good, cpCA: bad},
			"gateway", []string{"[ERROR]", "the control plane's TLS files do not load", "no PEM certificate", "kept_old=\"control plane TLS\""}},
		{"a missing origin CA is kept", reloadFiles{originCA: filepath.Join(dir, "absent.pem")},
			"", []string{"the origins' CA file does not load", "-origin-ca: open"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out syncBuffer
			log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info})
			f := &fakeReloader{}
			tc.files.reload(f, log)
			if got := strings.Join(f.calls, ","); got != tc.wantCalls {
				t.Errorf("set %q, want %q", got, tc.wantCalls)
			}
			for _, w := range tc.wantLog {
				if !strings.Contains(out.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestDrainTimeoutFlag: -drain-timeout reaches the agent (0: no drain) and
// a negative one is refused with the flag's name.
func TestDrainTimeoutFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want time.Duration
	}{
		{"default", nil, nodeagent.DefaultDrainTimeout},
		{"given", []string{"-drain-timeout", "3s"}, 3 * time.Second},
		{"zero: none", []string{"-drain-timeout", "0"}, nodeagent.NoDrain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := captureAgent(t)
			if err := run(append([]string{"-proxy-listen", "127.0.0.1:0", "-state-dir", t.TempDir()}, tc.args...)); !errors.Is(err, errStop) {
				t.Fatalf("run: %v", err)
			}
			if got.DrainTimeout != tc.want {
				t.Fatalf("DrainTimeout %v, want %v", got.DrainTimeout, tc.want)
			}
			if got.Build.Version == "" || got.Build.Commit == "" {
				t.Errorf("Build %+v: version and commit must be set", got.Build)
			}
		})
	}
	captureAgent(t)
	if err := run([]string{"-drain-timeout", "-1s"}); err == nil || errors.Is(err, errStop) || !strings.Contains(err.Error(), "-drain-timeout") {
		t.Fatalf("run with -drain-timeout -1s: %v, want an error naming the flag", err)
	}
}
