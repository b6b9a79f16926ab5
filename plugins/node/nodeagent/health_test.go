package nodeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/vigilcdn/vigil/internal/testcerts"
	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
)

// TestHealthEndpoints: /healthz answers 200 from the start; /readyz 503
// with the reason until the first publication, then 200; /metrics has
// vigil_node_build_info with the build's labels.
func TestHealthEndpoints(t *testing.T) {
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	r := startAgent(t, Config{ControlPlane: cp.URL(), MetricsListen: "127.0.0.1:0", Build: Build{Version: "1.2.3", Commit: "abc123"}})
	base := "http://" + r.a.MetricsAddr().String()
	read := func(t *testing.T, path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, path string
		code       int
		want       string
	}{
		{"healthz", "/healthz", 200, "ok\n"},
		{"readyz without a publication", "/readyz", 503, "no publication yet"},
		{"build_info", "/metrics", 200, `vigil_node_build_info{commit="abc123",goversion="go`},
		{"jobs at 0", "/metrics", 200, `vigil_node_probe_jobs_total{result="not_run"} 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := read(t, tc.path); code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("GET %s: %d %q, want %d with %q", tc.path, code, body, tc.code, tc.want)
			}
		})
	}
	v := cp.Publish(site(1, named(t, "level-1")))
	r.await(t, EventPublication, v)
	if code, body := read(t, "/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz after a publication: %d %q", code, body)
	}
	if _, body := read(t, "/metrics"); !strings.Contains(body, `vigil_node_proxy_requests_total{code="5xx",site="www"} 0`) {
		t.Fatal("the published site's 5xx counter is not at 0")
	}
}

// TestDrainBound: when Run's context ends, a request in flight gets
// DrainTimeout to end; one that outlasts it has its connection closed and
// Run returns all the same, while one that ends in time is answered.
func TestDrainBound(t *testing.T) {
	for _, tc := range []struct {
		name     string
		drain    time.Duration
		finishes bool
	}{
		{"a request outlasting the bound is cut", 50 * time.Millisecond, false},
		{"a request ending within the bound is answered", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived, release := make(chan struct{}), make(chan struct{})
			origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(arrived)
				select {
				case <-release:
				case <-r.Context().Done():
				}
				_, _ = io.WriteString(w, "slow")
			}))
			t.Cleanup(origin.Close)
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})
			cp := fakecp.New()
			t.Cleanup(cp.Close)
			v := cp.Publish(site(1, origin.URL))
			r := startAgent(t, Config{ControlPlane: cp.URL(), DrainTimeout: tc.drain})
			r.await(t, EventPublication, v)
			type answer struct {
				body string
				err  error
			}
			got := make(chan answer, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodGet, "http://"+r.a.ProxyAddr().String()+"/", nil)
				req.Host = "www.example.com"
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					got <- answer{err: err}
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				got <- answer{string(b), err}
			}()
			<-arrived
			stopped := make(chan struct{})
			go func() { r.stop(); close(stopped) }()
			if tc.finishes {
				// The listener closes first; then the request may end.
				waitClosed(t, r.a.ProxyAddr().String())
				close(release)
			}
			select {
			case <-stopped:
			case <-time.After(30 * time.Second): // a hang guard only
				t.Fatal("Run did not return")
			}
			a := <-got
			if tc.finishes && (a.err != nil || a.body != "slow") {
				t.Fatalf("the request in flight: %q, %v; want it answered", a.body, a.err)
			}
			if !tc.finishes && a.err == nil && a.body == "slow" {
				t.Fatal("the request outlasting the drain bound was answered: nothing was cut")
			}
		})
	}
}

// waitClosed waits until addr refuses connections.
func waitClosed(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard only
	for time.Now().Before(deadline) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		_ = c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s still accepts connections", addr)
}

// TestSwapCredsReload: the gateway link's credentials handshake with the
// TLS configuration set last: a server whose CA was not trusted is after
// SetGatewayTLS gives its CA.
func TestSwapCredsReload(t *testing.T) {
	ca1, ca2 := testcerts.NewCA(t, "gateway CA 1"), testcerts.NewCA(t, "gateway CA 2")
	leaf := ca2.Issue(t, testcerts.Options{Names: []string{"127.0.0.1"}})
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); _ = c.Close() }()
		}
	}()
	pool := func(ca *testcerts.CA) *tls.Config {
		p := x509.NewCertPool()
		p.AppendCertsFromPEM(ca.PEM)
		return &tls.Config{RootCAs: p, MinVersion: tls.VersionTLS12}
	}
	a := &Agent{gatewayCreds: newSwapCreds(credentials.NewTLS(pool(ca1)))}
	handshake := func() error {
		raw, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, _, err := a.gatewayCreds.ClientHandshake(ctx, "127.0.0.1", raw)
		if err == nil {
			_ = c.Close()
		}
		return err
	}
	if err := handshake(); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("with CA 1: %v, want an unknown authority", err)
	}
	a.SetGatewayTLS(pool(ca2))
	if err := handshake(); err != nil {
		t.Fatalf("after SetGatewayTLS with CA 2: %v", err)
	}
	a.SetGatewayTLS(nil) // nil changes nothing
	if err := handshake(); err != nil {
		t.Fatalf("after SetGatewayTLS(nil): %v", err)
	}
}

// failingEdge is an edge whose applies fail until ok is set.
type failingEdge struct{ ok atomic.Bool }

func (f *failingEdge) Name() string { return "fake" }

func (f *failingEdge) Apply(context.Context, *edge.View) (edge.Result, error) {
	if f.ok.Load() {
		return edge.Result{}, nil
	}
	return edge.Result{}, errors.New("the fake edge refuses")
}

// TestReadyzEdge: with a publication, /readyz is 503 naming the edge while
// its last apply failed, and 200 once one succeeded.
func TestReadyzEdge(t *testing.T) {
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	v := cp.Publish(site(1, named(t, "level-1")))
	fe := &failingEdge{}
	r := startAgent(t, Config{ControlPlane: cp.URL(), MetricsListen: "127.0.0.1:0", Edges: []edge.Driver{fe},
		Edge: edge.HubOptions{Resync: 20 * time.Millisecond}})
	r.await(t, EventPublication, v)
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + r.a.MetricsAddr().String() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Wait on the event (an apply failed), with a guard against a hang.
	waitFor := func(what string, cond func(int, string) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, body := readyz()
			if cond(code, body) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /readyz still %d %q", what, code, body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("a failed apply", func(code int, body string) bool {
		return code == 503 && strings.Contains(body, "edge fake: the last apply failed: the fake edge refuses")
	})
	fe.ok.Store(true)
	waitFor("a good apply", func(code int, body string) bool { return code == 200 && body == "ready\n" })
}
