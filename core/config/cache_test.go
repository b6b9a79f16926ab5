package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// projection is everything a Config says, with its HCL bodies reduced to
// their attributes and ranges, for comparing two loads.
type projection struct {
	Control   Control
	Sources   []string
	Sites     []string
	Notifiers []Notifier
	DNS       *DNSPublisher
	Files     map[string]string
	Diags     []string
	Shared    int // distinct health check values
}

func project(t *testing.T, cfg *Config, diags hcl.Diagnostics) projection {
	t.Helper()
	p := projection{Control: cfg.Control, DNS: cfg.DNS, Files: map[string]string{}}
	for _, s := range cfg.Sources {
		attrs := ""
		if s.Config != nil {
			as, d := s.Config.JustAttributes()
			if d.HasErrors() {
				t.Fatal(d.Error())
			}
			for _, name := range sortedKeys(as) {
				v, _ := as[name].Expr.Value(nil)
				attrs += fmt.Sprintf("%s=%#v@%v;", name, v, as[name].Range)
			}
		}
		c := *s
		c.Config = nil
		p.Sources = append(p.Sources, fmt.Sprintf("%+v|%s", c, attrs))
	}
	hcs := map[*HealthCheck]bool{}
	for _, s := range cfg.Sites {
		hcs[s.HealthCheck] = true
		var origins []string
		for _, o := range s.Origins {
			origins = append(origins, fmt.Sprintf("%+v", *o))
		}
		p.Sites = append(p.Sites, fmt.Sprintf("%s|%s|%v|%v|%+v|%v|%v", s.Name, s.Hostname, s.Failback, s.Sources, *s.HealthCheck, origins, s.DeclRange))
	}
	p.Shared = len(hcs)
	for _, n := range cfg.Notifiers {
		p.Notifiers = append(p.Notifiers, *n)
	}
	for name, f := range cfg.Files {
		p.Files[name] = fmt.Sprintf("%d bytes, %q", len(f.Bytes), contextString(f, len(f.Bytes)/2))
	}
	for _, d := range diags {
		p.Diags = append(p.Diags, fmt.Sprintf("%v %s %s %v", d.Severity, d.Summary, d.Detail, d.Subject))
	}
	return p
}

func contextString(f *hcl.File, offset int) string {
	if n, ok := f.Nav.(interface{ ContextString(int) string }); ok {
		return n.ContextString(offset)
	}
	return ""
}

func sortedKeys(m hcl.Attributes) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func writeConfig(t *testing.T, dir string, extra string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `control {
  data_dir = %q
  round_interval = "10s"
}
source "node" {
  plugin = "vigil-source-node"
  min_votes = 2
  config {
    listen = "127.0.0.1:8471"
    nodes_per_round = 3
  }
}
source "direct" { plugin = "vigil-source-direct" }
notify "webhook" "ops" { url = "https://hooks.example.com/x" }
publish "dns" {
  listen = "127.0.0.1:5353"
  zone = "example.com."
  ttl = 120
}
%s
`, dir, extra)
	for i := 0; i < 1500; i++ { // enough for shared health checks and CA sums; chunking has its own tests
		hc := `health_check { path = "/h" }`
		if i%3 == 0 {
			hc = fmt.Sprintf(`health_check {
    ca_file = %q
    headers = { "X-Probe" = "%d" }
  }`, filepath.Join(dir, "ca.pem"), i%2)
		}
		fmt.Fprintf(&b, "site \"s%05d\" {\n  hostname = \"s%05d.example.com\"\n  %s\n  origin \"a\" { address = \"https://127.0.0.1:1\" }\n  origin \"b\" {\n    address = \"https://127.0.0.1:2\"\n    level = 2\n  }\n}\n", i, i, hc)
	}
	path := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadCachedIsLoad(t *testing.T) {
	dir := t.TempDir()
	ca, err := os.ReadFile("testdata/ca/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, dir, "")
	want, wantDiags := Load(path)
	if wantDiags.HasErrors() {
		t.Fatal(wantDiags.Error())
	}
	if len(wantDiags) == 0 {
		t.Fatal("the test config should carry a warning (the DNS TTL) to check that warnings survive the cache")
	}
	wantP := project(t, want, wantDiags)
	cachePath := filepath.Join(dir, CacheFileName)

	check := func(t *testing.T, name string, fromCache bool) {
		t.Helper()
		before, _ := os.Stat(cachePath)
		got, gotDiags := LoadCached(path)
		if gotDiags.HasErrors() {
			t.Fatal(gotDiags.Error())
		}
		if gp := project(t, got, gotDiags); !reflect.DeepEqual(gp, wantP) {
			t.Fatalf("%s: LoadCached differs from Load", name)
		}
		after, err := os.Stat(cachePath)
		if err != nil {
			t.Fatalf("%s: no cache written: %v", name, err)
		}
		if rewritten := before == nil || !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size(); rewritten == fromCache {
			t.Fatalf("%s: the cache was rewritten %v, want %v", name, rewritten, !fromCache)
		}
	}
	t.Run("first load writes the cache", func(t *testing.T) { check(t, "first", false) })
	t.Run("second load reads it", func(t *testing.T) { check(t, "second", true) })
	t.Run("a changed CA bundle is read anew", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(dir, "ca.pem"), append(ca, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
		want, wantDiags = Load(path)
		wantP = project(t, want, wantDiags)
		check(t, "ca changed", false)
	})
	t.Run("a damaged cache is ignored", func(t *testing.T) {
		if err := os.WriteFile(cachePath, []byte("not a cache"), 0o600); err != nil {
			t.Fatal(err)
		}
		got, diags := LoadCached(path)
		if diags.HasErrors() || !reflect.DeepEqual(project(t, got, diags), wantP) {
			t.Fatal("a damaged cache changed the load")
		}
	})
	t.Run("a changed file is parsed", func(t *testing.T) {
		path = writeConfig(t, dir, `site "extra" {
  hostname = "extra.example.com"
  origin "a" { address = "http://127.0.0.1:1" }
  origin "b" { address = "http://127.0.0.1:2" }
}`)
		got, diags := LoadCached(path)
		if diags.HasErrors() || got.Site("extra") == nil {
			t.Fatalf("the change was not seen: %v", diags)
		}
	})
	t.Run("an invalid configuration writes no cache", func(t *testing.T) {
		_ = os.Remove(cachePath)
		bad := filepath.Join(dir, "bad.hcl")
		_ = os.WriteFile(bad, []byte(fmt.Sprintf("control { data_dir = %q }\nsite \"x\" { failback = \"sometimes\" }\n", dir)), 0o600)
		if _, diags := LoadCached(bad); !diags.HasErrors() {
			t.Fatal("no error")
		}
		if _, err := os.Stat(cachePath); err == nil {
			t.Fatal("a cache was written for an invalid configuration")
		}
	})
}
