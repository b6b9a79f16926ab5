package direct_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vigilcdn/vigil/internal/testcerts"
	"github.com/vigilcdn/vigil/internal/testnet"
)

// TestProbeSeriesEndToEnd runs a real agent with the real direct plugin
// against two loopback origins, one https with a test certificate and one
// plain http that answers 503, and reads the blackbox_exporter-style
// series the plugin's votes carry to /metrics: the status code, the time
// of each phase, the certificate's expiry (https only) and each origin's
// info.
func TestProbeSeriesEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binaries")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/",
		"github.com/vigilcdn/vigil/cmd/vigil",
		"github.com/vigilcdn/vigil/plugins/direct/cmd/vigil-source-direct")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the binaries: %v\n%s", err, out)
	}
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "vigil probe series test CA")
	notAfter := time.Now().Add(40 * 24 * time.Hour).Truncate(time.Second)
	leaf := ca.Issue(t, testcerts.Options{Names: []string{"www.example.com", "127.0.0.1"}, NotAfter: notAfter})
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	secure := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	secure.StartTLS()
	t.Cleanup(secure.Close)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)

	caFile := ca.WriteCA(t, dir, "ca")
	api := testnet.Addr(t)
	cfg := fmt.Sprintf(`
control {
  round_interval = "500ms"
  data_dir       = %q
  plugin_dir     = %q
  api { listen = %q }
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check { ca_file = %q }
  origin "a1" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), bin, api, caFile, secure.URL, failing.URL)
	config := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	agent := exec.Command(filepath.Join(bin, "vigil"), "agent", "-config", config)
	agent.Stdout, agent.Stderr = &out, &out
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		_ = agent.Wait()
		if t.Failed() {
			t.Logf("agent output:\n%s", out.String())
		}
	})

	// A hang guard only: wait for a round whose votes reached /metrics.
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(2 * time.Minute)
	for {
		fams = scrapeMetrics("http://" + api + "/metrics")
		if gauge(fams, "vigil_probe_http_status_code", "origin", "b1") > 0 && gauge(fams, "vigil_probe_ssl_earliest_cert_expiry", "origin", "a1") > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no probe series on /metrics after 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	direct := []string{"site", "www", "source", "direct", "voter", "direct"}
	on := func(labels ...string) []string { return append(slices.Clone(direct), labels...) }
	for _, tt := range []struct {
		name   string
		series string
		labels []string
		check  func(v float64) bool
		want   string
	}{
		{"expiry of the https origin's certificate", "vigil_probe_ssl_earliest_cert_expiry", on("origin", "a1"), func(v float64) bool { return v == float64(notAfter.Unix()) }, fmt.Sprint(notAfter.Unix())},
		{"status of the https origin", "vigil_probe_http_status_code", on("origin", "a1"), func(v float64) bool { return v == 200 }, "200"},
		{"status of the failing origin", "vigil_probe_http_status_code", on("origin", "b1"), func(v float64) bool { return v == 503 }, "503"},
		{"a TLS handshake for https", "vigil_probe_http_duration_seconds", on("origin", "a1", "phase", "tls"), func(v float64) bool { return v > 0 }, "> 0"},
		{"no TLS for http", "vigil_probe_http_duration_seconds", on("origin", "b1", "phase", "tls"), func(v float64) bool { return v == 0 }, "0"},
		{"a connection", "vigil_probe_http_duration_seconds", on("origin", "b1", "phase", "connect"), func(v float64) bool { return v > 0 }, "> 0"},
		{"no resolution for an IP address", "vigil_probe_http_duration_seconds", on("origin", "a1", "phase", "resolve"), func(v float64) bool { return v == 0 }, "0"},
		{"processing", "vigil_probe_http_duration_seconds", on("origin", "a1", "phase", "processing"), func(v float64) bool { return v > 0 }, "> 0"},
		{"the origin's info", "vigil_origin_info", []string{"site", "www", "origin", "a1", "level", "1", "address", secure.URL}, func(v float64) bool { return v == 1 }, "1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, n := sample(fams, tt.series, tt.labels...)
			if n != 1 || !tt.check(v) {
				t.Errorf("%s%v: %d series, value %v; want one, %s", tt.series, tt.labels, n, v, tt.want)
			}
		})
	}
	t.Run("no certificate series for plain http", func(t *testing.T) {
		if _, n := sample(fams, "vigil_probe_ssl_earliest_cert_expiry", "origin", "b1"); n != 0 {
			t.Errorf("%d series of the http origin", n)
		}
	})
}

func scrapeMetrics(url string) map[string]*dto.MetricFamily {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil
	}
	return fams
}

// sample is the value of the gauge samples of name whose labels include
// the name/value pairs given, summed, and how many there are.
func sample(fams map[string]*dto.MetricFamily, name string, labels ...string) (sum float64, n int) {
	for _, m := range fams[name].GetMetric() {
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			ok = ok && slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			})
		}
		if ok {
			sum += m.GetGauge().GetValue()
			n++
		}
	}
	return sum, n
}

func gauge(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	v, _ := sample(fams, name, labels...)
	return v
}
