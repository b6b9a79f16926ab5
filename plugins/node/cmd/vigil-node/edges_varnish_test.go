package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/plugins/node/edge"
)

// TestVarnishFlags: -varnish-admin builds the live Varnish driver from the
// secret file; a missing or unreadable secret, or the Varnish flags
// without -varnish-admin, are refused with the fix.
func TestVarnishFlags(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		f    edgeFlags
		want string // "" for success
	}{
		{"admin and secret", edgeFlags{varnishAdmin: "127.0.0.1:6082", varnishSecret: secret}, ""},
		{"no secret", edgeFlags{varnishAdmin: "127.0.0.1:6082"}, "-varnish-admin needs -varnish-secret"},
		{"unreadable secret", edgeFlags{varnishAdmin: "127.0.0.1:6082", varnishSecret: secret + ".missing"}, "-varnish-secret: "},
		{"secret without admin", edgeFlags{varnishSecret: secret}, "need -varnish-admin"},
		{"probe without admin", edgeFlags{varnishProbe: "/health"}, "need -varnish-admin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.f.haSrvArgs, tt.f.haTLSArgs = edge.DefaultHAProxyServerArgs, edge.DefaultHAProxyTLSArgs
			tt.f.haRemoveAfter, tt.f.haWatch = edge.DefaultHAProxyRemoveAfter, edge.DefaultHAProxyWatch
			drivers, err := edgeDrivers(tt.f)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(drivers) != 1 || drivers[0].Name() != "varnish" {
					t.Fatalf("drivers %v, want the varnish one", drivers)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one with %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}
