package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/plugins/node/xds"
)

// TestXDSFlags: -xds-listen adds the xDS edge, listening at once; its
// other flags without it, or a bad address, are refused naming the flag.
func TestXDSFlags(t *testing.T) {
	t.Run("serves", func(t *testing.T) {
		cfg := captureAgent(t)
		if err := run([]string{"-control-plane", "http://127.0.0.1:1", "-xds-listen", "127.0.0.1:0", "-log-level", "error"}); !errors.Is(err, errStop) {
			t.Fatalf("run: %v", err)
		}
		if len(cfg.Edges) != 1 || cfg.Edges[0].Name() != "xds" {
			t.Fatalf("edges = %v, want the xds one", cfg.Edges)
		}
		s := cfg.Edges[0].(*xds.Server)
		t.Cleanup(s.Close)
		if !strings.HasPrefix(s.Addr().String(), "127.0.0.1:") {
			t.Errorf("listening on %s", s.Addr())
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"http listener without xds", []string{"-xds-http-listen", "127.0.0.1:8080"}, "need -xds-listen"},
		{"trusted CA without xds", []string{"-xds-trusted-ca", "/etc/ca.pem"}, "need -xds-listen"},
		{"bad http listener", []string{"-xds-listen", "127.0.0.1:0", "-xds-http-listen", "envoy:80"}, "-xds-listen: xds: Envoy's HTTP listener \"envoy:80\": give an IP and a port"},
		{"bad listen address", []string{"-xds-listen", "127.0.0.1:notaport"}, "-xds-listen: xds: listening on 127.0.0.1:notaport"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			captureAgent(t)
			err := run(append([]string{"-control-plane", "http://127.0.0.1:1", "-log-level", "error"}, tc.args...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}
