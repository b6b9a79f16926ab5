package probe

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// silentOrigin accepts connections and never says a word. Each connection's
// end (the client hanging up) is reported on the returned channel.
func silentOrigin(t *testing.T) (addr string, hungUp <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{}, 16)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				io.Copy(io.Discard, c) // returns when the client closes
				closed <- struct{}{}
			})
		}
	})
	return ln.Addr().String(), closed
}

// silentDNS is a DNS server on loopback that reads queries and never
// answers. It returns a resolver that asks only it, and a channel that
// gets the first query.
func silentDNS(t *testing.T) (*net.Resolver, <-chan struct{}) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { pc.Close(); <-done })
	go func() {
		defer close(done)
		var once sync.Once
		buf := make([]byte, 512)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			once.Do(func() { close(asked) })
		}
	}()
	server := pc.LocalAddr().String()
	r := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", server)
		},
	}
	return r, asked
}

// TestDoTimeoutPhases checks that one timeout covers every stage of a probe
// and that the result says which stage it cut short.
func TestDoTimeoutPhases(t *testing.T) {
	const timeout = 200 * time.Millisecond
	ca := newTestCA(t)
	cert := leaf(t, ca, []string{siteHost}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	h1 := newOrigin(t, nil)
	h2 := newH2Origin(t, &cert)

	cases := []struct {
		name   string
		setup  func(t *testing.T) (address, path string, hungUp <-chan struct{})
		phase  Phase
		status int
		detail string
	}{
		{"hung DNS lookup", func(t *testing.T) (string, string, <-chan struct{}) {
			r, asked := silentDNS(t)
			useResolver(t, r)
			t.Cleanup(func() {
				select {
				case <-asked:
				default:
					t.Error("the DNS server was never asked")
				}
			})
			return "http://origin.vigil.test", "/", nil
		}, PhaseDNS, 0, "timeout during the DNS lookup (200ms)"},
		{"hung connect", func(t *testing.T) (string, string, <-chan struct{}) {
			return "http://" + hangingListener(t), "/", nil
		}, PhaseConnect, 0, "timeout while connecting (200ms)"},
		{"hung TLS handshake", func(t *testing.T) (string, string, <-chan struct{}) {
			addr, hungUp := silentOrigin(t)
			return "https://" + addr, "/", hungUp
		}, PhaseTLS, 0, "timeout during the TLS handshake (200ms)"},
		{"no response headers", func(t *testing.T) (string, string, <-chan struct{}) {
			addr, hungUp := silentOrigin(t)
			return "http://" + addr, "/", hungUp
		}, PhaseHeaders, 0, "timeout waiting for the response headers (200ms)"},
		{"no response headers over HTTP/2", func(t *testing.T) (string, string, <-chan struct{}) {
			return h2.url, "/hang", nil
		}, PhaseHeaders, 0, "timeout waiting for the response headers (200ms)"},
		{"no body after the headers", func(t *testing.T) (string, string, <-chan struct{}) {
			return h1.url, "/stall", nil
		}, PhaseBody, 200, "timeout reading the body after 0 bytes (200ms)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, path, hungUp := tc.setup(t)
			got, err := Do(context.Background(), Request{Address: addr, Host: siteHost, Path: path, Timeout: timeout, RootCAs: ca.pool})
			check(t, got, err, want{false, Timeout, tc.status})
			if got.Phase != tc.phase || got.Detail != tc.detail {
				t.Errorf("phase %q, detail %q; want %q, %q", got.Phase, got.Detail, tc.phase, tc.detail)
			}
			if got.Duration < timeout {
				t.Errorf("timed out after %v, before the %v timeout", got.Duration, timeout)
			}
			if hungUp != nil {
				// The connection must not outlive the probe.
				select {
				case <-hungUp:
				case <-time.After(10 * time.Second):
					t.Fatal("the probe's connection is still open after Do returned")
				}
			}
		})
	}
}
