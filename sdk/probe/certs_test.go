package probe

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// testPKI is a throwaway certificate authority for TLS tests.
type testPKI struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

var serial atomic.Int64

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return key
}

func newTestCA(t *testing.T) *testPKI {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: "vigil probe test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("create CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse CA certificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testPKI{cert: cert, key: key, pool: pool}
}

// leaf issues a server certificate for names, valid from notBefore to
// notAfter. With ca nil the certificate is self-signed.
func leaf(t *testing.T, ca *testPKI, names []string, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatalf("create certificate: %v", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestResultPeerCertificate: an https probe exposes the origin's leaf
// certificate and its expiry, so a plugin can warn of one that expires soon.
func TestResultPeerCertificate(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	notAfter := now.Add(72 * time.Hour).Truncate(time.Second)
	cert := leaf(t, ca, []string{siteHost}, now.Add(-time.Hour), notAfter)
	o := newOrigin(t, &cert)
	got, err := Do(context.Background(), Request{Address: o.url, Host: siteHost, Path: "/tls", RootCAs: ca.pool})
	if err != nil || !got.Up {
		t.Fatalf("probe = %+v, %v", got, err)
	}
	if got.PeerCertificate == nil || !got.CertNotAfter.Equal(notAfter) || !got.PeerCertificate.NotAfter.Equal(notAfter) {
		t.Errorf("PeerCertificate %v, CertNotAfter %v, want the leaf expiring at %v", got.PeerCertificate != nil, got.CertNotAfter, notAfter)
	}
	plain := newOrigin(t, nil)
	got, _ = Do(context.Background(), Request{Address: plain.url, Host: siteHost, Path: "/tls"})
	if got.PeerCertificate != nil || !got.CertNotAfter.IsZero() {
		t.Errorf("plain HTTP probe has a certificate: %+v", got)
	}
}
