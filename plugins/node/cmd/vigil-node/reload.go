package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node/edge"
)

// reloadFiles is the files a SIGHUP re-reads: the flags naming them.
type reloadFiles struct {
	tlsCA, tlsCert, tlsKey, tlsName string
	cpCA, cpCert, cpKey             string
	originCA                        string
	// edges are the edge drivers; the templates among them read their
	// -template sources again.
	edges []edge.Driver
}

// reparser is a template driver (edge.Template).
type reparser interface {
	Reparse() (int, error)
}

// reloader is what a reload changes in the running agent.
type reloader interface {
	SetGatewayTLS(*tls.Config)
	SetControlPlaneTLS(*tls.Config)
	SetProbeRootCAs(*x509.CertPool)
}

// reload re-reads the files of f into a and logs one line saying what was
// re-read. A file that no longer loads is logged as an error and the one
// in use is kept. It never ends the process.
func (f reloadFiles) reload(a reloader, log hclog.Logger) {
	var reread, failed []string
	if f.tlsCA != "" || f.tlsCert != "" {
		if tc, err := gatewayTLS(f.tlsCA, f.tlsCert, f.tlsKey, f.tlsName); err != nil {
			log.Error("SIGHUP: the gateway's TLS files do not load; the ones in use are kept", "error", err)
			failed = append(failed, "gateway TLS")
		} else {
			a.SetGatewayTLS(tc)
			reread = append(reread, "gateway TLS (-tls-ca, -tls-cert, -tls-key)")
		}
	}
	if f.cpCA != "" || f.cpCert != "" || f.cpKey != "" {
		if tc, err := controlPlaneTLS(f.cpCA, f.cpCert, f.cpKey); err != nil {
			log.Error("SIGHUP: the control plane's TLS files do not load; the ones in use are kept", "error", err)
			failed = append(failed, "control plane TLS")
		} else {
			a.SetControlPlaneTLS(tc)
			reread = append(reread, "control plane TLS (-control-plane-ca, -control-plane-cert, -control-plane-key)")
		}
	}
	if f.originCA != "" {
		if roots, err := originRoots(f.originCA); err != nil {
			log.Error("SIGHUP: the origins' CA file does not load; the one in use is kept", "error", err)
			failed = append(failed, "origin CA")
		} else {
			a.SetProbeRootCAs(roots)
			reread = append(reread, "origin CA (-origin-ca: the probes, the canaries and the proxy's next connections)")
		}
	}
	for _, d := range f.edges {
		t, ok := d.(reparser)
		if !ok {
			continue
		}
		if n, err := t.Reparse(); err != nil {
			log.Error("SIGHUP: a template does not parse; the ones in use are kept", "edge", d.Name(), "error", err)
			failed = append(failed, d.Name())
		} else if n > 0 {
			reread = append(reread, fmt.Sprintf("%s (%d template file(s), applied at once)", d.Name(), n))
		}
	}
	if len(reread) == 0 && len(failed) == 0 {
		log.Info("SIGHUP: nothing to re-read (no TLS, CA or template file given); still running")
		return
	}
	log.Info("SIGHUP: files re-read; still running", "reread", strings.Join(reread, "; "), "kept_old", strings.Join(failed, "; "))
}

// buildCommit is the commit vigil_node_build_info shows: the one linked
// in, or the one Go recorded from a checkout.
func buildCommit() string {
	line := versionLine() // "vigil-node V (commit C, ...)"
	_, rest, _ := strings.Cut(line, "(commit ")
	c, _, _ := strings.Cut(rest, ",")
	return c
}
