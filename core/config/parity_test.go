package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/vigilcdn/vigil/core/config"
)

// parityConfigs are configurations that together set every field of every
// configuration type: the reference's every block with every attribute at
// its example, once with the attributes that are alternatives to others in
// their place, and the values gob lost (a pointer to a zero, an empty
// list). Each is written in dir, with data_dir inside it.
func parityConfigs(t *testing.T, dir string) map[string]string {
	t.Helper()
	ref := config.Reference()
	q := strconv.Quote
	// build sets every attribute to its example; alt, when set, names the
	// one attribute that takes the place of the one it is Instead of.
	build := func(altBlock, alt string) *refNode {
		root := refBase()
		for _, b := range ref {
			if b.Plugin {
				continue
			}
			n := refPlace(root, ref, b)
			for _, a := range b.Attributes {
				if a.Instead == "" {
					n.set(a.Name, a.Example)
				}
			}
			for _, a := range b.Attributes {
				if b.Path == altBlock && a.Name == alt {
					n.unset(a.Instead)
					n.set(a.Name, a.Example)
				}
			}
		}
		control, _ := root.child("control")
		control.set("data_dir", q(filepath.Join(dir, "data")))
		// A plugin's config block, with a nested block, and a source
		// without AutoMTLS.
		node, _ := root.child("source", "node")
		node.set("auto_mtls", "false")
		cb, _ := node.child("config")
		cb.set("listen", q("127.0.0.1:8471"))
		cb.set("nodes_per_round", "3")
		nested, _ := cb.child("tls")
		nested.set("cert_file", q("node.crt"))
		// A second site with the same health check as the first shares it.
		www, _ := root.child("site", "www")
		twin := &refNode{typ: "site", labels: []string{"www2"}, attrs: slices.Clone(www.attrs), blocks: www.blocks}
		twin.set("hostname", q("www2.example.com"))
		root.blocks = append(root.blocks, twin)
		dns, _ := root.child("publish", "dns")
		dns.set("fail_closed", "true")
		return root
	}
	out := map[string]string{
		"every attribute": build("", "").String(),
		"a pointer to zero, empty lists, shared values": fmt.Sprintf(`control {
  data_dir = %q
  sites_per_round = "auto"
  metrics { probe_series_sites = 0 }
}
source "direct" {
  plugin = "vigil-source-direct"
  env = []
  config {}
}
source "node" {
  plugin = "vigil-source-node"
  config { listen = "127.0.0.1:8471" }
}
site "www" {
  hostname = "www.example.com"
  health_check {
    headers = {}
    insecure_skip_tls_verify = true
  }
  origin "a" { address = "https://203.0.113.10" }
  origin "b" { address = "https://203.0.113.11" }
}
site "www2" {
  hostname = "www2.example.com"
  health_check {
    headers = {}
    insecure_skip_tls_verify = true
  }
  origin "a" { address = "https://203.0.113.10" }
  origin "b" { address = "https://203.0.113.11" }
}
site "www3" {
  hostname = "www3.example.com"
  sources = ["direct"]
  origin "a" { address = "https://203.0.113.10" }
  origin "b" { address = "https://203.0.113.11" }
}
site "www4" {
  hostname = "www4.example.com"
  origin "a" { address = "https://203.0.113.10" }
  origin "b" { address = "https://203.0.113.11" }
}
`, filepath.Join(dir, "data")),
	}
	for _, b := range ref {
		for _, a := range b.Attributes {
			if a.Instead != "" {
				out[b.Path+"."+a.Name+" instead of "+a.Instead] = build(b.Path, a.Name).String()
			}
		}
	}
	return out
}

// TestLoadCachedParity: for every parity configuration, LoadCached gives
// what Load gives, field for field and in what is shared: when it parses
// and writes the cache, when it reads the cache as a new process does, and
// when a second call in the same process (a SIGHUP) finds nothing changed.
func TestLoadCachedParity(t *testing.T) {
	base := refDir(t)
	for name, src := range parityConfigs(t, base) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(base, "vigil.hcl")
			if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(filepath.Join(base, "data")) })
			config.ForgetLastLoad()
			want, wantDiags := config.Load(path)
			if wantDiags.HasErrors() {
				t.Fatalf("the configuration does not load: %v\n%s", wantDiags.Errs(), src)
			}
			for _, step := range []struct {
				name   string
				forget bool
			}{
				{"parsed, cache written", false},
				{"from the cache file, as a new process", true},
				{"unchanged, in the same process", false},
			} {
				if step.forget {
					config.ForgetLastLoad()
				}
				got, gotDiags := config.LoadCached(path)
				for _, d := range configDiff(want, got) {
					t.Errorf("%s: %s", step.name, d)
				}
				if a, b := diagStrings(wantDiags), diagStrings(gotDiags); !slices.Equal(a, b) {
					t.Errorf("%s: diagnostics differ:\nLoad:       %q\nLoadCached: %q", step.name, a, b)
				}
				if _, err := os.Stat(filepath.Join(base, "data", config.CacheFileName)); err != nil {
					t.Fatalf("%s: no cache written: %v", step.name, err)
				}
			}
		})
	}
}

// TestParityConfigsSetEveryField: the parity configurations leave no
// field of any configuration type at its zero value, so that a field
// added to a type, and the cache's handling of it, is compared by
// TestLoadCachedParity once the reference describes its attribute.
func TestParityConfigsSetEveryField(t *testing.T) {
	base := refDir(t)
	set := map[string]bool{}
	for name, src := range parityConfigs(t, base) {
		cfg, diags := config.Parse(filepath.Join(base, "vigil.hcl"), []byte(src))
		if diags.HasErrors() {
			t.Fatalf("%s does not load: %v", name, diags.Errs())
		}
		markSet(reflect.ValueOf(cfg).Elem(), set)
	}
	missing := unsetFields(reflect.TypeFor[config.Config](), set)
	for _, f := range missing {
		t.Errorf("%s is zero in every parity configuration: make parityConfigs set it (a reference example, or a case of its own)", f)
	}
}

// TestUnsetFieldsCatchesAField: the walk reports a field never set, so
// TestParityConfigsSetEveryField cannot pass by looking at nothing.
func TestUnsetFieldsCatchesAField(t *testing.T) {
	type inner struct{ A, B int }
	type outer struct {
		In    []*inner
		Names map[string]inner
		C     string
	}
	set := map[string]bool{}
	markSet(reflect.ValueOf(outer{In: []*inner{{A: 1}}, C: "x"}), set)
	got := unsetFields(reflect.TypeFor[outer](), set)
	want := []string{"config_test.inner.B", "config_test.outer.Names"}
	if !slices.Equal(got, want) {
		t.Fatalf("unsetFields = %q, want %q", got, want)
	}
}

// fieldName is "pkg.Type.Field".
func fieldName(t reflect.Type, f reflect.StructField) string {
	return t.String() + "." + f.Name
}

// markSet records every exported struct field that is not zero in v.
func markSet(v reflect.Value, set map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			markSet(v.Elem(), set)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			markSet(v.Index(i), set)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			markSet(it.Value(), set)
		}
	case reflect.Struct:
		t := v.Type()
		if !ownType(t) {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if !v.Field(i).IsZero() {
				set[fieldName(t, f)] = true
			}
			markSet(v.Field(i), set)
		}
	}
}

// ownType: a struct type of this module (hcl.Range's fields are HCL's).
func ownType(t reflect.Type) bool {
	return strings.HasPrefix(t.PkgPath(), "github.com/vigilcdn/vigil/") || strings.HasSuffix(t.PkgPath(), "_test")
}

// unsetFields lists the exported fields of this module's struct types
// reachable from t that set does not hold, sorted.
func unsetFields(t reflect.Type, set map[string]bool) []string {
	var out []string
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(t.Elem())
		case reflect.Map:
			walk(t.Key())
			walk(t.Elem())
		case reflect.Struct:
			if !ownType(t) {
				return
			}
			for i := range t.NumField() {
				f := t.Field(i)
				if !f.IsExported() {
					continue
				}
				if !set[fieldName(t, f)] {
					out = append(out, fieldName(t, f))
				}
				walk(f.Type)
			}
		}
	}
	walk(t)
	sort.Strings(out)
	return out
}

// configDiff compares two Configs field by field, unexported fields
// included, and what they share: a value two places of a hold by one
// pointer (a health check of several sites) must be one value in b too.
// Source config blocks compare by their attributes, blocks and ranges.
func configDiff(a, b *config.Config) []string {
	c := &differ{ab: map[uintptr]uintptr{}, ba: map[uintptr]uintptr{}}
	c.diff("Config", reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem())
	return c.out
}

type differ struct {
	out    []string
	ab, ba map[uintptr]uintptr
}

func (c *differ) add(path, format string, args ...any) {
	if len(c.out) < 20 {
		c.out = append(c.out, path+": "+fmt.Sprintf(format, args...))
	}
}

var bodyType = reflect.TypeFor[hcl.Body]()

func (c *differ) diff(path string, a, b reflect.Value) {
	if a.Type() == bodyType {
		c.bodies(path, a, b)
		return
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Map:
		if a.IsNil() != b.IsNil() {
			c.add(path, "nil %v in Load, %v in LoadCached", a.IsNil(), b.IsNil())
			return
		}
		if a.IsNil() {
			return
		}
		pa, pb := a.Pointer(), b.Pointer()
		if prev, ok := c.ab[pa]; ok {
			if prev != pb {
				c.add(path, "Load shares this value with an earlier place, LoadCached does not")
			}
			return
		}
		if prev, ok := c.ba[pb]; ok && prev != pa {
			c.add(path, "LoadCached shares this value with an earlier place, Load does not")
			return
		}
		c.ab[pa], c.ba[pb] = pb, pa
		if a.Kind() == reflect.Pointer {
			c.diff(path, a.Elem(), b.Elem())
			return
		}
		if a.Len() != b.Len() {
			c.add(path, "%d entries in Load, %d in LoadCached", a.Len(), b.Len())
			return
		}
		it := a.MapRange()
		for it.Next() {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() {
				c.add(path, "key %v missing in LoadCached", it.Key())
				continue
			}
			c.diff(fmt.Sprintf("%s[%v]", path, it.Key()), it.Value(), bv)
		}
	case reflect.Slice:
		if a.IsNil() != b.IsNil() {
			c.add(path, "nil %v in Load, %v in LoadCached", a.IsNil(), b.IsNil())
			return
		}
		if a.Len() != b.Len() {
			c.add(path, "length %d in Load, %d in LoadCached", a.Len(), b.Len())
			return
		}
		for i := range a.Len() {
			c.diff(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i))
		}
	case reflect.Array:
		for i := range a.Len() {
			c.diff(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i))
		}
	case reflect.Struct:
		for i := range a.NumField() {
			c.diff(path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))
		}
	case reflect.Interface:
		if a.IsNil() != b.IsNil() {
			c.add(path, "nil %v in Load, %v in LoadCached", a.IsNil(), b.IsNil())
			return
		}
		if !a.IsNil() {
			if a.Elem().Type() != b.Elem().Type() {
				c.add(path, "a %v in Load, a %v in LoadCached", a.Elem().Type(), b.Elem().Type())
				return
			}
			c.diff(path, a.Elem(), b.Elem())
		}
	default:
		// Unexported fields are read, not set: compare what they say.
		if x, y := fmt.Sprint(valueOf(a)), fmt.Sprint(valueOf(b)); x != y {
			c.add(path, "%s in Load, %s in LoadCached", x, y)
		}
	}
}

func valueOf(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint()
	case reflect.Float32, reflect.Float64:
		return v.Float()
	case reflect.String:
		return strconv.Quote(v.String())
	}
	return "a " + v.Type().String()
}

// bodies compares two source config blocks as a plugin sees them: their
// attributes' values and ranges and their blocks, recursively.
func (c *differ) bodies(path string, a, b reflect.Value) {
	if a.IsNil() || b.IsNil() {
		if a.IsNil() != b.IsNil() {
			c.add(path, "nil %v in Load, %v in LoadCached", a.IsNil(), b.IsNil())
		}
		return
	}
	x, okx := a.Interface().(*hclsyntax.Body)
	y, oky := b.Interface().(*hclsyntax.Body)
	if !okx || !oky {
		c.add(path, "a %T in Load, a %T in LoadCached", a.Interface(), b.Interface())
		return
	}
	if bodyString(x) != bodyString(y) {
		c.add(path, "config block\n%s\nin Load,\n%s\nin LoadCached", bodyString(x), bodyString(y))
	}
}

func bodyString(body *hclsyntax.Body) string {
	var s strings.Builder
	fmt.Fprintf(&s, "body %v {", body.SrcRange)
	names := make([]string, 0, len(body.Attributes))
	for n := range body.Attributes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := body.Attributes[n]
		v, _ := a.Expr.Value(nil)
		fmt.Fprintf(&s, "%s=%#v@%v(%v);", n, v, a.SrcRange, a.Expr.Range())
	}
	for _, b := range body.Blocks {
		fmt.Fprintf(&s, "%s%q@%v %s;", b.Type, b.Labels, b.DefRange(), bodyString(b.Body))
	}
	return s.String() + "}"
}

func diagStrings(diags hcl.Diagnostics) []string {
	var out []string
	for _, d := range diags {
		out = append(out, fmt.Sprintf("%v|%s|%s|%v|%v", d.Severity, d.Summary, d.Detail, d.Subject, d.Context))
	}
	return out
}

// TestConfigDiffCatchesADifference: configDiff reports a changed field,
// a lost pointer to zero, and sharing that differs.
func TestConfigDiffCatchesADifference(t *testing.T) {
	dir := refDir(t)
	src := parityConfigs(t, dir)["a pointer to zero, empty lists, shared values"]
	load := func() *config.Config {
		cfg, diags := config.Parse(filepath.Join(dir, "vigil.hcl"), []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return cfg
	}
	tests := []struct {
		name   string
		change func(*config.Config)
		want   string
	}{
		{"a field", func(c *config.Config) { c.Sources[0].PlaintextTransport = true }, ".PlaintextTransport: false in Load, true in LoadCached"},
		{"a pointer", func(c *config.Config) { c.Control.ProbeSeriesSites = nil }, "Config.Control.ProbeSeriesSites: nil false in Load, true in LoadCached"},
		{"sharing", func(c *config.Config) { hc := *c.Sites[1].HealthCheck; c.Sites[1].HealthCheck = &hc }, "Load shares this value with an earlier place, LoadCached does not"},
		{"a config block", func(c *config.Config) { c.Sources[0].Config = nil }, ".Config: nil false in Load, true in LoadCached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := load(), load()
			if d := configDiff(a, b); len(d) > 0 {
				t.Fatalf("two loads differ before the change: %v", d)
			}
			tt.change(b)
			d := configDiff(a, b)
			if !slices.ContainsFunc(d, func(s string) bool { return strings.Contains(s, tt.want) }) {
				t.Fatalf("configDiff does not report %q; it reports %q", tt.want, d)
			}
		})
	}
}

// TestHealthChecksSharedOnlyWhenEqual: the loader shares one health check
// among sites whose blocks mean the same (hcKey, healthcheck.go, a list of
// the fields by hand); two blocks that differ in any attribute or nested
// block of the reference must not be shared, or a site would be probed
// with another's settings.
func TestHealthChecksSharedOnlyWhenEqual(t *testing.T) {
	dir := refDir(t)
	ref := config.Reference()
	type variant struct{ name, body string }
	var variants []variant
	for _, b := range ref {
		switch {
		case b.Path == "site.health_check":
			for _, a := range b.Attributes {
				switch {
				case a.Name == "path":
				case a.Type == "bool": // both values: the example may be the default
					variants = append(variants, variant{a.Name + " true", a.Name + " = true"}, variant{a.Name + " false", a.Name + " = false"})
				default:
					variants = append(variants, variant{a.Name, a.Name + " = " + a.Example})
				}
			}
		case b.Parent == "site.health_check":
			var body strings.Builder
			for _, a := range b.Attributes {
				fmt.Fprintf(&body, "%s = %s\n", a.Name, a.Example)
			}
			variants = append(variants, variant{b.Type, b.Type + " {\n" + body.String() + "}"})
		}
	}
	if len(variants) < 15 {
		t.Fatalf("found only %d health_check attributes and blocks in the reference", len(variants))
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			site := func(name, extra string) string {
				return fmt.Sprintf("site %q {\n  hostname = \"%s.example.com\"\n  health_check {\n    path = \"/p\"\n    %s\n  }\n  origin \"a1\" { address = \"https://203.0.113.10\" }\n  origin \"a2\" { address = \"https://203.0.113.11\" }\n}\n", name, name, extra)
			}
			src := "source \"direct\" { plugin = \"vigil-source-direct\" }\n" + site("x", v.body) + site("y", "") + site("z", "")
			cfg, diags := config.Parse(filepath.Join(dir, "vigil.hcl"), []byte(src))
			if diags.HasErrors() {
				t.Fatalf("%v\n%s", diags.Errs(), src)
			}
			x, y, z := cfg.Site("x").HealthCheck, cfg.Site("y").HealthCheck, cfg.Site("z").HealthCheck
			if y != z {
				t.Fatal("two equal health_check blocks are not shared: the test cannot tell sharing from not")
			}
			if x == y && !reflect.DeepEqual(healthCheckAlone(t, dir, site("x", v.body)), healthCheckAlone(t, dir, site("x", ""))) {
				t.Fatalf("a health_check with %s is shared with one without it: hcKey leaves it out", v.body)
			}
		})
	}
}

// healthCheckAlone is the health check of the one site in src, loaded
// without any other site to share it with.
func healthCheckAlone(t *testing.T, dir, src string) config.HealthCheck {
	t.Helper()
	cfg, diags := config.Parse(filepath.Join(dir, "vigil.hcl"), []byte("source \"direct\" { plugin = \"vigil-source-direct\" }\n"+src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	hc := *cfg.Sites[0].HealthCheck
	hc.TimeoutRange, hc.ConfirmRange = hcl.Range{}, hcl.Range{}
	return hc
}
