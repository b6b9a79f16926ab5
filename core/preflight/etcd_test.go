package preflight_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/preflight"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
	"github.com/vigilcdn/vigil/internal/testnet"
)

// TestCheckEtcd: validate asks etcd how many operations a transaction may
// have. A max_txn_ops above it is a warning at the attribute that names
// what the agent does and the fix; one etcd takes is quiet; an etcd that
// does not answer is a warning; offline, etcd is not asked.
func TestCheckEtcd(t *testing.T) {
	srv := etcdtest.Start(t, "--max-txn-ops", "40")
	nobody := "http://" + testnet.Addr(t)
	for _, tt := range []struct {
		name     string
		endpoint string
		maxOps   int
		offline  bool
		want     []string // in one warning's summary and detail; none: no etcd diagnostic
	}{
		{"above etcd's", srv.Endpoint, 128, false, []string{"etcd takes fewer operations per transaction than max_txn_ops", "at most 40", "set max_txn_ops = 40"}},
		{"what etcd takes", srv.Endpoint, 40, false, nil},
		{"etcd unreachable", nobody, 128, false, []string{"etcd not reached: max_txn_ops not checked", "waits for etcd"}},
		{"offline", nobody, 128, true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c := defaults()
			c.Sources = directSource("")
			c.Control = fmt.Sprintf(`store "etcd" {
    endpoints    = [%q]
    lease_ttl    = "2s"
    dial_timeout = "1s"
    max_txn_ops  = %d
  }`, tt.endpoint, tt.maxOps)
			text := c.render(dir)
			path := filepath.Join(dir, "vigil.hcl")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			var got hcl.Diagnostics
			for _, d := range validate(t, path, tt.offline) {
				if strings.Contains(d.Summary, "etcd") {
					got = append(got, d)
				}
				if d.Severity == hcl.DiagError {
					t.Errorf("unexpected error: %s: %s", d.Summary, d.Detail)
				}
			}
			if tt.want == nil {
				if len(got) != 0 {
					t.Fatalf("want no etcd diagnostic, got %s: %s", got[0].Summary, got[0].Detail)
				}
				return
			}
			if len(got) != 1 || got[0].Severity != hcl.DiagWarning {
				t.Fatalf("want one etcd warning, got %v", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got[0].Summary+" "+got[0].Detail, w) {
					t.Errorf("the warning %q: %q does not say %q", got[0].Summary, got[0].Detail, w)
				}
			}
			if s := got[0].Subject; s == nil || s.Start.Line != lineOf(t, text, "max_txn_ops  =") {
				t.Errorf("the warning points at %v, want the max_txn_ops line %d", s, lineOf(t, text, "max_txn_ops  ="))
			}
		})
	}
}

// TestNotes: with the state in etcd, validate says how a round larger
// than max_txn_ops is saved; without, it says nothing.
func TestNotes(t *testing.T) {
	fleet := func(sites int, store string) *config.Config {
		var b strings.Builder
		fmt.Fprintf(&b, "control {\n  %s\n}\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n", store)
		for i := range sites {
			fmt.Fprintf(&b, "site \"s%d\" {\n  hostname = \"s%d.example.com\"\n  origin \"a1\" { address = \"http://127.0.0.1:1\" }\n  origin \"a2\" { address = \"http://127.0.0.1:2\" }\n  origin \"b1\" {\n    address = \"http://127.0.0.1:3\"\n    level = 2\n  }\n}\n", i, i)
		}
		cfg, diags := config.Parse("fleet.hcl", []byte(b.String()))
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return cfg
	}
	etcd := `store "etcd" { endpoints = ["127.0.0.1:2379"] }`
	for _, tt := range []struct {
		name string
		cfg  *config.Config
		want []string
	}{
		{"500 sites", fleet(500, etcd), []string{"max_txn_ops = 128", "is split", "500 sites changing at once, about 2502 operations", "about 20 transactions", "commit marker"}},
		{"10 sites", fleet(10, etcd), []string{"max_txn_ops = 128", "always does"}},
		{"bbolt", fleet(10, ""), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			notes := preflight.Notes(tt.cfg)
			if tt.want == nil {
				if len(notes) != 0 {
					t.Fatalf("want no note, got %q", notes)
				}
				return
			}
			if len(notes) != 1 {
				t.Fatalf("want one note, got %q", notes)
			}
			for _, w := range tt.want {
				if !strings.Contains(notes[0], w) {
					t.Errorf("note %q does not say %q", notes[0], w)
				}
			}
		})
	}
}
