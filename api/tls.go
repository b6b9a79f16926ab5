package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// TLSFiles are what a client of an agent whose API serves https may need:
// CAFile, PEM certificates of the CA(s) that signed the API's certificate,
// trusted besides the system's roots (for a private CA); CertFile and
// KeyFile, a client certificate and its key, for an API with
// client_ca_file. Every field is optional.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
}

// Config reads the files into a tls.Config (nil, nil when no file is
// named). Errors name the file and say what to give instead.
func (f TLSFiles) Config() (*tls.Config, error) {
	if f == (TLSFiles{}) {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate (-----BEGIN CERTIFICATE-----): give the CA certificate that signed the API's certificate", f.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("a client certificate needs both its certificate file and its key file")
	}
	if f.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s with key %s: %v", f.CertFile, f.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// SetTLS makes the client use cfg for https (nil: the system's roots).
func (c *Client) SetTLS(cfg *tls.Config) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	c.HTTP = &http.Client{Timeout: c.HTTP.Timeout, Transport: t}
}

// explainTLS turns a failed https handshake into what to do about it.
func explainTLS(err error) error {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	var notTLS tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("the API's certificate is signed by a CA this client does not trust: give the CA's certificate with -ca-cert FILE (or VIGIL_CACERT): %w", err)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return fmt.Errorf("the API's certificate has expired or is not valid yet (now %s): renew it on the agent and send it SIGHUP: %w", time.Now().UTC().Format(time.RFC3339), err)
	case errors.As(err, &host):
		return fmt.Errorf("the API's certificate is not for the address used: connect by a name or IP address it lists, or reissue it with this one: %w", err)
	case remoteAlert(err, "certificate required", "bad certificate", "unknown certificate authority", "certificate expired"):
		return fmt.Errorf("the API asks for a client certificate signed by its client_ca_file: give one with -client-cert and -client-key (or VIGIL_CLIENT_CERT and VIGIL_CLIENT_KEY): %w", err)
	case errors.As(err, &notTLS):
		return fmt.Errorf("the API answered plain http to https: use an http:// address, or turn on control { api { tls } }: %w", err)
	}
	return err
}

// remoteAlert is whether err is a TLS alert the API sent about the
// client's certificate ("remote error: tls: certificate required"): Go
// gives those as text only.
func remoteAlert(err error, alerts ...string) bool {
	msg := err.Error()
	if !strings.Contains(msg, "remote error: tls: ") {
		return false
	}
	for _, a := range alerts {
		if strings.Contains(msg, "tls: "+a) {
			return true
		}
	}
	return false
}

// plainToHTTPS is the answer net/http gives an http request on an https
// listener.
const plainToHTTPS = "Client sent an HTTP request to an HTTPS server"
