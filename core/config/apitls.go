package config

// The control { api { tls { } } } block: https for the API.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// APITLS is the `control { api { tls { } } }` block: the API serves https
// with CertFile and KeyFile (reloaded on SIGHUP), and, with ClientCAFile,
// asks every client for a certificate signed by one of its CAs. Paths are
// absolute: a relative path in the file is taken from the folder of the
// file that names it.
type APITLS struct {
	CertFile     string
	KeyFile      string
	ClientCAFile string
	DeclRange    hcl.Range
}

var apiTLSSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "cert_file", Required: true}, {Name: "key_file", Required: true}, {Name: "client_ca_file"},
	},
}

// apiTLS reads an api block's tls block and checks that its files load,
// so that `vigil validate` says what the agent would refuse.
func (l *loader) apiTLS(b *hcl.Block, api *API) {
	if api.TLS != nil {
		l.add(b.DefRange, "Duplicate tls block",
			fmt.Sprintf("The api block already has a tls block at %s. Keep one.", api.TLS.DeclRange))
		return
	}
	content, diags := b.Body.Content(apiTLSSchema)
	l.diags = append(l.diags, diags...)
	t := &APITLS{DeclRange: b.DefRange}
	path := func(name string) (string, *hcl.Attribute) {
		attr := content.Attributes[name]
		var s string
		if attr == nil || !l.decode(attr, &s) {
			return "", nil
		}
		if strings.TrimSpace(s) == "" {
			l.add(attr.Expr.Range(), "Empty "+name, name+" must name a PEM file.")
			return "", nil
		}
		if !filepath.IsAbs(s) {
			s = filepath.Join(filepath.Dir(attr.Expr.Range().Filename), s)
		}
		return s, attr
	}
	var certAt, caAt *hcl.Attribute
	t.CertFile, certAt = path("cert_file")
	t.KeyFile, _ = path("key_file")
	t.ClientCAFile, caAt = path("client_ca_file")
	api.TLS = t
	if certAt != nil && t.KeyFile != "" {
		if _, err := LoadKeyPair(t.CertFile, t.KeyFile); err != nil {
			l.add(certAt.Expr.Range(), "Unusable API certificate", err.Error())
		} else if leaf, err := leafOf(t.CertFile); err == nil && time.Now().After(leaf.NotAfter) {
			l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Subject: certAt.Expr.Range().Ptr(), Summary: "Expired API certificate",
				Detail: fmt.Sprintf("%s expired on %s: clients will refuse the API. Renew it, replace the file and send the agent SIGHUP.", t.CertFile, leaf.NotAfter.UTC().Format(time.RFC3339))})
		}
	}
	if caAt != nil {
		if _, err := LoadCAPool(t.ClientCAFile); err != nil {
			l.add(caAt.Expr.Range(), "Unusable client_ca_file", err.Error())
		}
	}
}

// LoadKeyPair reads a certificate (the API's, or a client's) and its key. The error names
// the files and the fix, never the key's content.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cert_file %s with key_file %s: %v. Give a PEM certificate (its chain after it) and the PEM private key that matches it", certFile, keyFile, err)
	}
	return c, nil
}

// LoadCAPool reads a file of PEM CA certificates.
func LoadCAPool(file string) (*x509.CertPool, error) {
	ca := readCA(file)
	if ca.err != "" {
		return nil, fmt.Errorf("%s: %s", file, ca.err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	return pool, nil
}

// leafOf parses the first certificate of a PEM file: the server's own.
func leafOf(certFile string) (*x509.Certificate, error) {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("no certificate in %s", certFile)
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}
