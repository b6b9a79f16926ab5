package probe

import (
	"crypto/x509"
	"errors"
	"fmt"
	"sort"
)

// Roots turns a ballot's CA bundles (sdk.Ballot.CAs: PEM certificates by
// bundle name) into certificate pools, by the same names, for
// Request.RootCAs. A bundle without a usable certificate is left out and
// named in the error; the others are returned all the same.
func Roots(bundles map[string][]byte) (map[string]*x509.CertPool, error) {
	if len(bundles) == 0 {
		return nil, nil
	}
	pools := make(map[string]*x509.CertPool, len(bundles))
	var bad []string
	for name, pem := range bundles {
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(pem) {
			bad = append(bad, name)
			continue
		}
		pools[name] = p
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return pools, fmt.Errorf("%w: CA bundles with no PEM certificate: %v", errBadBundle, bad)
	}
	return pools, nil
}

var errBadBundle = errors.New("unusable CA bundle")
