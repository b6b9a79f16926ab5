package nodeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
)

// What a reload (vigil-node's SIGHUP) can change without a restart: the
// TLS files of the gateway link and of the control plane, and the CA of
// the origins' probes. Each takes effect at the next connection; one in
// use keeps what it was opened with.

// SetGatewayTLS makes the next connections to the gateways use tc (a
// renewed -tls-ca, -tls-cert, -tls-key). It does nothing when the agent
// started without TLS on its gateway link (Config.GatewayTLS nil) or tc
// is nil: a reload does not turn TLS on or off.
func (a *Agent) SetGatewayTLS(tc *tls.Config) {
	if a.gatewayCreds == nil || tc == nil {
		return
	}
	a.gatewayCreds.set(credentials.NewTLS(tc))
}

// SetControlPlaneTLS makes the next requests to the control planes (the
// publication's long poll, GET /v1/cluster, GET /v1/sites) use tc (a
// renewed -control-plane-ca, -control-plane-cert, -control-plane-key; nil:
// the system's roots and no client certificate). A long poll in flight
// ends on its old connection.
func (a *Agent) SetControlPlaneTLS(tc *tls.Config) {
	if a.cp == nil {
		return
	}
	a.cp.transport.set(tc)
}

// SetProbeRootCAs makes the next probes, canaries and the proxy's next
// connections to https origins trust roots (a renewed -origin-ca; nil:
// the system's roots).
func (a *Agent) SetProbeRootCAs(roots *x509.CertPool) {
	a.probeRoots.Store(roots)
	if a.proxy != nil {
		a.proxy.SetTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots})
	}
}

// probeRootCAs is the roots the probes verify origins against now.
func (a *Agent) probeRootCAs() *x509.CertPool { return a.probeRoots.Load() }

// swapTransport is an http.RoundTripper whose TLS configuration a reload
// replaces: each request goes through the transport current when it starts.
type swapTransport struct {
	base *http.Transport // the template every new transport is cloned from
	cur  atomic.Pointer[http.Transport]
}

func newSwapTransport(base *http.Transport, tc *tls.Config) *swapTransport {
	s := &swapTransport{base: base}
	s.set(tc)
	return s
}

func (s *swapTransport) set(tc *tls.Config) {
	tr := s.base.Clone()
	if tc != nil {
		tr.TLSClientConfig = tc.Clone()
	}
	if old := s.cur.Swap(tr); old != nil {
		old.CloseIdleConnections()
	}
}

// RoundTrip sends req through the current transport.
func (s *swapTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return s.cur.Load().RoundTrip(req)
}

// CloseIdleConnections closes the current transport's idle connections.
func (s *swapTransport) CloseIdleConnections() { s.cur.Load().CloseIdleConnections() }

// swapCreds is gRPC transport credentials whose TLS configuration a reload
// replaces: each new connection's handshake uses the current one.
type swapCreds struct {
	cur atomic.Pointer[credentials.TransportCredentials]
}

func newSwapCreds(c credentials.TransportCredentials) *swapCreds {
	s := &swapCreds{}
	s.set(c)
	return s
}

func (s *swapCreds) set(c credentials.TransportCredentials) { s.cur.Store(&c) }

func (s *swapCreds) get() credentials.TransportCredentials { return *s.cur.Load() }

func (s *swapCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return s.get().ClientHandshake(ctx, authority, conn)
}

func (s *swapCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return s.get().ServerHandshake(conn)
}

func (s *swapCreds) Info() credentials.ProtocolInfo { return s.get().Info() }

func (s *swapCreds) Clone() credentials.TransportCredentials { return s }

// OverrideServerName is part of the interface gRPC still declares, and no
// longer calls.
func (s *swapCreds) OverrideServerName(name string) error {
	//lint:ignore SA1019 the interface still declares it
	return s.get().OverrideServerName(name)
}
