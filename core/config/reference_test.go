package config_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/sdk/probe"
)

// TestReferenceMatchesSchemas: every attribute and nested block of every
// loader schema has a reference entry, every reference entry is in a
// schema, and every entry says its type, meaning and example.
func TestReferenceMatchesSchemas(t *testing.T) {
	for _, p := range refProblems(config.Reference(), config.Schemas()) {
		t.Error(p)
	}
}

// TestReferenceComparisonCatchesDrift: the comparison reports each kind of
// drift, so TestReferenceMatchesSchemas cannot pass by looking at nothing.
func TestReferenceComparisonCatchesDrift(t *testing.T) {
	tests := []struct {
		name   string
		change func(ref []config.RefBlock, schemas map[string]*hcl.BodySchema) []config.RefBlock
		want   string
	}{
		{"attribute missing from the reference", func(ref []config.RefBlock, _ map[string]*hcl.BodySchema) []config.RefBlock {
			b := refFind(ref, "site.health_check")
			b.Attributes = slices.DeleteFunc(b.Attributes, func(a config.RefAttribute) bool { return a.Name == "max_body" })
			return ref
		}, `site.health_check: the loader accepts attribute "max_body", which the reference does not describe`},
		{"attribute the loader does not accept", func(ref []config.RefBlock, _ map[string]*hcl.BodySchema) []config.RefBlock {
			b := refFind(ref, "control")
			b.Attributes = append(b.Attributes, config.RefAttribute{Name: "round_budget", Type: "duration", DefaultNote: "none", Meaning: "m", Example: `"1s"`})
			return ref
		}, `control: the reference describes attribute "round_budget", which the loader does not accept`},
		{"required differs", func(ref []config.RefBlock, _ map[string]*hcl.BodySchema) []config.RefBlock {
			a := refAttr(refFind(ref, "site.origin"), "address")
			a.Required, a.DefaultNote = false, "none"
			return ref
		}, `site.origin: attribute "address": the loader requires it but the reference says it is optional`},
		{"block missing from the reference", func(ref []config.RefBlock, _ map[string]*hcl.BodySchema) []config.RefBlock {
			return slices.DeleteFunc(ref, func(b config.RefBlock) bool { return b.Path == "control.api" })
		}, `control: the loader accepts block "api", which the reference does not describe`},
		{"nested block the loader gained", func(ref []config.RefBlock, schemas map[string]*hcl.BodySchema) []config.RefBlock {
			schemas["site"].Blocks = append(schemas["site"].Blocks, hcl.BlockHeaderSchema{Type: "maintenance"})
			return ref
		}, `site: the loader accepts block "maintenance", which the reference does not describe`},
		{"labels differ", func(ref []config.RefBlock, _ map[string]*hcl.BodySchema) []config.RefBlock {
			refFind(ref, "site").Labels = nil
			return ref
		}, `site: labels [] in the reference, [name] in the loader`},
		{"no example", func(ref []config.RefBlock, _ map[string]*hcl.BodySchema) []config.RefBlock {
			refAttr(refFind(ref, `publish "dns"`), "ttl").Example = ""
			return ref
		}, `publish "dns": attribute "ttl" has no example`},
		{"no meaning", func(ref []config.RefBlock, _ map[string]*hcl.BodySchema) []config.RefBlock {
			refAttr(refFind(ref, "source"), "tally").Meaning = " "
			return ref
		}, `source: attribute "tally" has no meaning`},
		{"no type", func(ref []config.RefBlock, _ map[string]*hcl.BodySchema) []config.RefBlock {
			refAttr(refFind(ref, `notify "webhook"`), "format").Type = ""
			return ref
		}, `notify "webhook": attribute "format" has no type`},
		{"schema without a reference block", func(ref []config.RefBlock, schemas map[string]*hcl.BodySchema) []config.RefBlock {
			schemas["site.cdn"] = &hcl.BodySchema{}
			return ref
		}, `site.cdn: the loader has a schema for it but the reference has no block`},
		{"reference block without a schema", func(ref []config.RefBlock, schemas map[string]*hcl.BodySchema) []config.RefBlock {
			delete(schemas, "site.origin")
			return ref
		}, `site.origin: the reference describes it but the loader has no schema for it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Good to begin with: the change alone makes the problem.
			ref, schemas := config.Reference(), config.Schemas()
			if p := refProblems(ref, schemas); len(p) > 0 {
				t.Fatalf("the reference does not match the loader before the change: %v", p)
			}
			ref = tt.change(ref, schemas)
			got := refProblems(ref, schemas)
			if !slices.Contains(got, tt.want) {
				t.Fatalf("the comparison does not report %q; it reports %q", tt.want, got)
			}
		})
	}
	// The change above went to copies: the loader's schemas are intact.
	if p := refProblems(config.Reference(), config.Schemas()); len(p) > 0 {
		t.Fatalf("changing the copies changed the loader or the reference: %v", p)
	}
}

func refFind(ref []config.RefBlock, path string) *config.RefBlock {
	for i := range ref {
		if ref[i].Path == path {
			return &ref[i]
		}
	}
	panic("no reference block " + path)
}

func refAttr(b *config.RefBlock, name string) *config.RefAttribute {
	for i := range b.Attributes {
		if b.Attributes[i].Name == name {
			return &b.Attributes[i]
		}
	}
	panic("no attribute " + name + " in " + b.Path)
}

// refPath is the path a block of this type and labels has under parent.
func refPath(parent, typ string, labels []config.RefLabel) string {
	p := typ
	if parent != "" {
		p = parent + "." + typ
	}
	for _, l := range labels {
		if l.Fixed != "" {
			p += " " + strconv.Quote(l.Fixed)
		}
	}
	return p
}

// refProblems compares the reference with the loader's schemas and checks
// that every entry is complete.
func refProblems(ref []config.RefBlock, schemas map[string]*hcl.BodySchema) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	byPath := map[string]*config.RefBlock{}
	for i := range ref {
		b := &ref[i]
		if byPath[b.Path] != nil {
			add("%s: two reference blocks have this path", b.Path)
		}
		byPath[b.Path] = b
		if want := refPath(b.Parent, b.Type, b.Labels); b.Path != want {
			add("%s: the path of a %q block under %q with these labels is %q", b.Path, b.Type, b.Parent, want)
		}
		if b.Parent != "" && byPath[b.Parent] == nil {
			add("%s: its parent %q is not described before it", b.Path, b.Parent)
		}
		if strings.TrimSpace(b.Meaning) == "" {
			add("%s: the block has no meaning", b.Path)
		}
		if strings.TrimSpace(b.Repeat) == "" {
			add("%s: the block does not say how many may appear (Repeat)", b.Path)
		}
		for _, l := range b.Labels {
			if strings.TrimSpace(l.Meaning) == "" {
				add("%s: label %q has no meaning", b.Path, l.Name)
			}
			if l.Fixed == "" && l.Example == "" {
				add("%s: label %q has no example", b.Path, l.Name)
			}
		}
		s, has := schemas[b.Path]
		switch {
		case b.Plugin && has:
			add("%s: the reference says a plugin defines it but the loader has a schema for it", b.Path)
		case b.Plugin && len(b.Attributes) > 0:
			add("%s: a plugin-defined block lists attributes of its own", b.Path)
		case !b.Plugin && !has:
			add("%s: the reference describes it but the loader has no schema for it", b.Path)
		}
		seen := map[string]bool{}
		for _, a := range b.Attributes {
			if seen[a.Name] {
				add("%s: attribute %q is described twice", b.Path, a.Name)
			}
			seen[a.Name] = true
			for _, f := range []struct{ what, v string }{{"type", a.Type}, {"meaning", a.Meaning}, {"example", a.Example}} {
				if strings.TrimSpace(f.v) == "" {
					add("%s: attribute %q has no %s", b.Path, a.Name, f.what)
				}
			}
			switch {
			case a.Required && (a.Default != "" || a.DefaultNote != ""):
				add("%s: attribute %q is required but has a default", b.Path, a.Name)
			case !a.Required && a.Default == "" && a.DefaultNote == "":
				add("%s: optional attribute %q says nothing of its default", b.Path, a.Name)
			}
			if a.Instead != "" && !slices.ContainsFunc(b.Attributes, func(o config.RefAttribute) bool { return o.Name == a.Instead && o.Instead == "" }) {
				add("%s: attribute %q is instead of %q, which is not another attribute of the block", b.Path, a.Name, a.Instead)
			}
			if s == nil {
				continue
			}
			i := slices.IndexFunc(s.Attributes, func(sa hcl.AttributeSchema) bool { return sa.Name == a.Name })
			switch {
			case i < 0:
				add("%s: the reference describes attribute %q, which the loader does not accept", b.Path, a.Name)
			case s.Attributes[i].Required && !a.Required:
				add("%s: attribute %q: the loader requires it but the reference says it is optional", b.Path, a.Name)
			case !s.Attributes[i].Required && a.Required:
				add("%s: attribute %q: the reference says it is required but the loader does not require it", b.Path, a.Name)
			}
		}
	}
	paths := make([]string, 0, len(schemas))
	for p := range schemas {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		s := schemas[p]
		b := byPath[p]
		if p != "" && b == nil {
			add("%s: the loader has a schema for it but the reference has no block", p)
			continue
		}
		name := p
		if p == "" {
			name = "the top level"
		}
		for _, sa := range s.Attributes {
			if b == nil || !slices.ContainsFunc(b.Attributes, func(a config.RefAttribute) bool { return a.Name == sa.Name }) {
				add("%s: the loader accepts attribute %q, which the reference does not describe", name, sa.Name)
			}
		}
		for _, h := range s.Blocks {
			var kids []*config.RefBlock
			for i := range ref {
				if ref[i].Parent == p && ref[i].Type == h.Type {
					kids = append(kids, &ref[i])
				}
			}
			if len(kids) == 0 {
				add("%s: the loader accepts block %q, which the reference does not describe", name, h.Type)
			}
			for _, k := range kids {
				var names []string
				for _, l := range k.Labels {
					names = append(names, l.Name)
				}
				if !slices.Equal(names, h.LabelNames) {
					add("%s: labels %v in the reference, %v in the loader", k.Path, names, h.LabelNames)
				}
			}
		}
	}
	// Every reference block is a block its parent's schema accepts.
	for _, b := range ref {
		ps, ok := schemas[b.Parent]
		if !ok {
			if byPath[b.Parent] != nil {
				add("%s: its parent %q has no loader schema, so the loader does not read it", b.Path, b.Parent)
			}
			continue
		}
		if !slices.ContainsFunc(ps.Blocks, func(h hcl.BlockHeaderSchema) bool { return h.Type == b.Type }) {
			add("%s: the reference describes it but the loader accepts no %q block there", b.Path, b.Type)
		}
	}
	return out
}

// TestSchemasNamesEveryLoaderSchema: every package-level *hcl.BodySchema of
// the loader's code is one that Schemas returns, so that a schema added
// beside the others (and the block that reads it) cannot be left out of
// the comparison.
func TestSchemasNamesEveryLoaderSchema(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{} // name -> file
	var used map[string]bool
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					vs, ok := spec.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, v := range vs.Values {
						if refIsBodySchema(v) {
							vars[vs.Names[i].Name] = n
						}
					}
				}
			case *ast.FuncDecl:
				if d.Name.Name == "Schemas" && d.Recv == nil {
					used = map[string]bool{}
					ast.Inspect(d.Body, func(x ast.Node) bool {
						if id, ok := x.(*ast.Ident); ok {
							used[id.Name] = true
						}
						return true
					})
				}
			}
		}
	}
	if used == nil {
		t.Fatal("no func Schemas in the package")
	}
	if len(vars) < 5 {
		t.Fatalf("found only %v as package-level schemas: the scan lost its way", vars)
	}
	for v, file := range vars {
		if !used[v] {
			t.Errorf("%s declares the schema %s, which Schemas (reference.go) does not return: add it under its block's path, and describe the block in Reference", file, v)
		}
	}
}

// refIsBodySchema reports whether x is &hcl.BodySchema{...}.
func refIsBodySchema(x ast.Expr) bool {
	u, ok := x.(*ast.UnaryExpr)
	if !ok || u.Op != token.AND {
		return false
	}
	c, ok := u.X.(*ast.CompositeLit)
	if !ok {
		return false
	}
	sel, ok := c.Type.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "hcl" && sel.Sel.Name == "BodySchema"
}

// refNode is a block (or the file) to write as HCL.
type refNode struct {
	typ    string
	labels []string
	attrs  [][2]string // name, expression
	blocks []*refNode
}

func (n *refNode) set(name, expr string) {
	for i := range n.attrs {
		if n.attrs[i][0] == name {
			n.attrs[i][1] = expr
			return
		}
	}
	n.attrs = append(n.attrs, [2]string{name, expr})
}

func (n *refNode) unset(name string) {
	n.attrs = slices.DeleteFunc(n.attrs, func(a [2]string) bool { return a[0] == name })
}

// child returns the block of this type and labels, added when missing.
func (n *refNode) child(typ string, labels ...string) (c *refNode, added bool) {
	for _, b := range n.blocks {
		if b.typ == typ && slices.Equal(b.labels, labels) {
			return b, false
		}
	}
	c = &refNode{typ: typ, labels: labels}
	n.blocks = append(n.blocks, c)
	return c, true
}

func (n *refNode) write(b *strings.Builder, indent string) {
	for _, a := range n.attrs {
		fmt.Fprintf(b, "%s%s = %s\n", indent, a[0], a[1])
	}
	for _, c := range n.blocks {
		b.WriteString(indent + c.typ)
		for _, l := range c.labels {
			b.WriteString(" " + strconv.Quote(l))
		}
		b.WriteString(" {\n")
		c.write(b, indent+"  ")
		b.WriteString(indent + "}\n")
	}
}

func (n *refNode) String() string {
	var b strings.Builder
	n.write(&b, "")
	return b.String()
}

// refBase is a small valid configuration whose names the reference's
// examples use: the sources node, dnspup and direct, and a site www with
// origins a1, a2 (level 1) and b1 (level 2).
func refBase() *refNode {
	root := &refNode{}
	for _, s := range []string{"node", "dnspup", "direct"} {
		src, _ := root.child("source", s)
		src.set("plugin", strconv.Quote("vigil-source-"+s))
	}
	site, _ := root.child("site", "www")
	site.set("hostname", `"www.example.com"`)
	for i, o := range []string{"a1", "a2", "b1"} {
		origin, _ := site.child("origin", o)
		origin.set("address", fmt.Sprintf(`"https://203.0.113.%d"`, 10+i))
		if o == "b1" {
			origin.set("level", "2")
		}
	}
	return root
}

// refPlace returns the node of block b in root, adding it and its parents
// (with their required attributes, from the examples) when missing.
func refPlace(root *refNode, ref []config.RefBlock, b config.RefBlock) *refNode {
	parent := root
	if b.Parent != "" {
		parent = refPlace(root, ref, *refFind(ref, b.Parent))
	}
	var labels []string
	for _, l := range b.Labels {
		if l.Fixed != "" {
			labels = append(labels, l.Fixed)
		} else {
			labels = append(labels, l.Example)
		}
	}
	n, added := parent.child(b.Type, labels...)
	if added {
		for _, a := range b.Attributes {
			if a.Required || a.OneOfRequired {
				n.set(a.Name, a.Example)
			}
		}
	}
	return n
}

// refLoad parses src as the file dir/vigil.hcl, beside a CA bundle at the
// path the ca_file example names.
func refLoad(t *testing.T, src string) (*config.Config, hcl.Diagnostics) {
	t.Helper()
	return config.Parse(filepath.Join(refDir(t), "vigil.hcl"), []byte(src))
}

// refDir is a new folder holding the CA bundle, certificate and key the
// examples name, at the paths they name relative to a file in it.
func refDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ca, err := os.ReadFile(filepath.Join("testdata", "ca", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "ca", "private-ca.pem")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	// The API's tls block names a certificate, its key and a client CA.
	if err := os.MkdirAll(filepath.Join(dir, "tls"), 0o755); err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{"api.crt": "api.crt", "api.key": "api.key"} {
		b, err := os.ReadFile(filepath.Join("testdata", "tls", from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tls", to), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "tls", "ca.pem"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReferenceExamplesLoad: every block written with every attribute set
// to its example loads without error; an attribute that is an
// alternative to another loads in its place.
func TestReferenceExamplesLoad(t *testing.T) {
	ref := config.Reference()
	for _, b := range ref {
		if b.Plugin {
			continue
		}
		t.Run(b.Path, func(t *testing.T) {
			try := func(t *testing.T, skip func(config.RefAttribute) bool, extra *config.RefAttribute) {
				t.Helper()
				root := refBase()
				n := refPlace(root, ref, b)
				for _, a := range b.Attributes {
					if !skip(a) {
						n.set(a.Name, a.Example)
					}
				}
				if extra != nil {
					n.unset(extra.Instead)
					n.set(extra.Name, extra.Example)
				}
				src := root.String()
				if _, diags := refLoad(t, src); diags.HasErrors() {
					t.Fatalf("the examples do not load: %v\n%s", diags.Errs(), src)
				}
			}
			try(t, func(a config.RefAttribute) bool { return a.Instead != "" }, nil)
			for _, a := range b.Attributes {
				if a.Instead != "" {
					t.Run(a.Name+" instead of "+a.Instead, func(t *testing.T) {
						try(t, func(a config.RefAttribute) bool { return a.Instead != "" }, &a)
					})
				}
			}
		})
	}
}

// TestReferenceDefaults: every default the reference writes as an HCL
// literal is what the loader fills in when the attribute is left out.
func TestReferenceDefaults(t *testing.T) {
	ref := config.Reference()
	root := refBase()
	for _, b := range ref {
		if !b.Plugin {
			refPlace(root, ref, b)
		}
	}
	cfg, diags := refLoad(t, root.String())
	if diags.HasErrors() {
		t.Fatalf("the blocks with only their required attributes do not load: %v\n%s", diags.Errs(), root)
	}
	q := strconv.Quote
	// A duration as the reference writes it: "24h", "5m", not "24h0m0s".
	dur := func(d time.Duration) string {
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return q(s)
	}
	list := func(l []string) string {
		s := make([]string, len(l))
		for i, v := range l {
			s[i] = q(v)
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	c := cfg.Control
	src := cfg.Source("dnspup")
	site := cfg.Site("www")
	hc := site.HealthCheck
	var origin *config.Origin
	for _, o := range site.Origins {
		if o.Name == "a1" {
			origin = o
		}
	}
	loaded := map[string]string{
		"control.round_interval":                     dur(c.RoundInterval),
		"control.sites_per_round":                    strconv.Itoa(c.SitesPerRound),
		"control.confirm_budget":                     strconv.Itoa(c.ConfirmBudget),
		"control.data_dir":                           q(c.DataDir),
		"control.plugin_dir":                         q(c.PluginDir),
		"control.api.listen":                         q(c.API.Listen),
		"control.api.read_access":                    q(c.API.ReadAccess),
		"control.partition.rounds":                   strconv.Itoa(c.Partition.Rounds),
		"control.history.keep":                       dur(c.HistoryKeep),
		"control.metrics.probe_series_sites":         strconv.Itoa(c.ProbeSeries()),
		`control.store "etcd".prefix`:                q(c.Store.Prefix),
		`control.store "etcd".lease_ttl`:             dur(c.Store.LeaseTTL),
		`control.store "etcd".mode`:                  q(c.Store.Mode),
		`control.store "etcd".dial_timeout`:          dur(c.Store.DialTimeout),
		`control.store "etcd".max_txn_ops`:           strconv.Itoa(c.Store.MaxTxnOps),
		`control.store "etcd".compaction_interval`:   dur(c.Store.CompactionInterval),
		"source.min_votes":                           strconv.Itoa(src.MinVotes),
		"source.tally":                               q(src.Tally.String()),
		"source.env":                                 list(src.Env),
		"source.auto_mtls":                           strconv.FormatBool(!src.PlaintextTransport),
		"site.failback":                              q(site.Failback.String()),
		"site.health_check.enabled":                  strconv.FormatBool(hc.Enabled),
		"site.health_check.path":                     q(hc.Path),
		"site.health_check.timeout":                  dur(hc.Timeout),
		"site.health_check.unhealthy_threshold":      strconv.Itoa(hc.UnhealthyThreshold),
		"site.health_check.healthy_threshold":        strconv.Itoa(hc.HealthyThreshold),
		"site.health_check.user_agent":               q(hc.UserAgent),
		"site.health_check.insecure_skip_tls_verify": strconv.FormatBool(hc.InsecureSkipTLSVerify),
		"site.health_check.follow_redirects":         strconv.FormatBool(hc.FollowRedirects),
		"site.origin.level":                          strconv.Itoa(origin.Level),
		"site.origin.enabled":                        strconv.FormatBool(origin.Enabled),
		`notify "webhook".format`:                    q(cfg.Notifiers[0].Format),
		`notify "webhook".timeout`:                   dur(cfg.Notifiers[0].Timeout),
		`notify "alertmanager".installation`:         q(cfg.Notifiers[1].Installation),
		`notify "alertmanager".resend_interval`:      dur(cfg.Notifiers[1].ResendInterval),
		`notify "alertmanager".timeout`:              dur(cfg.Notifiers[1].Timeout),
		`publish "dns".ttl`:                          strconv.Itoa(cfg.DNS.TTL),
		`publish "dns".fail_closed`:                  strconv.FormatBool(cfg.DNS.FailClosed),
		`publish "dns".soa_refresh`:                  strconv.Itoa(cfg.DNS.SOARefresh),
		`publish "dns".soa_retry`:                    strconv.Itoa(cfg.DNS.SOARetry),
		`publish "dns".soa_expire`:                   strconv.Itoa(cfg.DNS.SOAExpire),
		`publish "dns".tsig_algorithm`:               q(cfg.DNS.TSIGAlgorithm),
		`publish "dns".rrl_rate`:                     strconv.Itoa(cfg.DNS.RRLRate),
		`publish "dns".rrl_slip`:                     strconv.Itoa(cfg.DNS.RRLSlip),
		`publish "dns_update".ttl`:                   strconv.Itoa(cfg.DNSUpdate.TTL),
		`publish "dns_update".tsig_algorithm`:        q(cfg.DNSUpdate.TSIGAlgorithm),
		`publish "dns_update".timeout`:               dur(cfg.DNSUpdate.Timeout),
	}
	// max_body left out is 0: the probe's own default.
	if hc.MaxBody == 0 && probe.DefaultMaxBody == 1<<20 {
		loaded["site.health_check.max_body"] = q("1MiB")
	}
	checked := map[string]bool{}
	for _, b := range ref {
		for _, a := range b.Attributes {
			if a.Default == "" {
				continue
			}
			key := b.Path + "." + a.Name
			checked[key] = true
			if _, d := hclsyntax.ParseExpression([]byte(a.Default), key, hcl.InitialPos); d.HasErrors() {
				t.Errorf("%s: the default %s is not an HCL literal; put words in DefaultNote", key, a.Default)
				continue
			}
			got, ok := loaded[key]
			switch {
			case !ok:
				t.Errorf("%s: the reference's default %s is not checked: add what the loader fills in to this test", key, a.Default)
			case got != a.Default:
				t.Errorf("%s: the reference says the default is %s, the loader fills in %s", key, a.Default, got)
			}
		}
	}
	for key := range loaded {
		if !checked[key] {
			t.Errorf("%s: checked here, but the reference gives no literal default", key)
		}
	}
}
