package nodeagent

import (
	"crypto/x509"
	"testing"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
)

// A probe verifies an https origin against the bundle its job names when
// the batch carries it, and otherwise against the node's own roots
// (Config.ProbeRootCAs, vigil-node's -origin-ca; nil: the system's).
func TestProbeRootsFallBackToTheNodes(t *testing.T) {
	bundle, node := x509.NewCertPool(), x509.NewCertPool()
	roots := map[string]*x509.CertPool{"corp": bundle}
	for _, tc := range []struct {
		name     string
		ca       string
		fallback *x509.CertPool
		want     *x509.CertPool
	}{
		{"the job's bundle", "corp", node, bundle},
		{"no bundle named: the node's roots", "", node, node},
		{"a bundle the batch lacks: the node's roots", "other", node, node},
		{"no node roots: the system's", "", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &pb.ProbeJob{Address: "https://127.0.0.1:8443", Ca: tc.ca}
			if got := request(j, roots, tc.fallback).RootCAs; got != tc.want {
				t.Errorf("roots %p, want %p", got, tc.want)
			}
		})
	}
}
