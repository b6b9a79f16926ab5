package config

// The site blocks and their origins.

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/vigilcdn/vigil/core/decide"
)

var siteSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "hostname", Required: true}, {Name: "failback"}, {Name: "sources"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "health_check"},
		{Type: "origin", LabelNames: []string{"name"}},
	},
}

var originSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "address", Required: true}, {Name: "level"}, {Name: "enabled"},
	},
}

func (l *loader) site(b *hcl.Block) {
	name := b.Labels[0]
	if err := checkName("site", name); err != nil {
		l.add(b.LabelRanges[0], "Invalid site name", err.Error())
		return
	}
	if prev, ok := l.siteAt[name]; ok {
		l.add(b.DefRange, "Duplicate site name",
			fmt.Sprintf("A site named %q was already declared at %s. Site names must be unique: rename or remove one of them.", name, prev))
		return
	}
	l.siteAt[name] = b.DefRange
	said := l.saidSoFar()
	content, diags := b.Body.Content(siteSchema)
	l.diags = append(l.diags, diags...)
	s := &Site{Name: name, DeclRange: b.DefRange, HealthCheck: l.defaultHealthCheck()}
	if attr := content.Attributes["hostname"]; attr != nil {
		var h string
		if l.decode(attr, &h) {
			if err := checkHostname(h); err != nil {
				l.add(attr.Expr.Range(), "Invalid hostname", err.Error())
			} else {
				s.Hostname = strings.ToLower(h)
			}
		}
	}
	if attr := content.Attributes["failback"]; attr != nil {
		var f string
		if l.decode(attr, &f) {
			if v, err := decide.ParseFailback(f); err != nil {
				l.add(attr.Expr.Range(), "Invalid failback",
					fmt.Sprintf("failback must be \"auto\" (switch back to a healthy higher level by itself) or \"manual\" (only announce it); got %q.", f))
			} else {
				s.Failback = v
			}
		}
	}
	sb := siteBlock{site: s, sourcesAttr: content.Attributes["sources"]}
	var hcSeen *hcl.Range
	originAt := map[string]hcl.Range{}
	duplicates := false
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "health_check":
			if hcSeen != nil {
				l.add(blk.DefRange, "Duplicate health_check block",
					fmt.Sprintf("This site already has a health_check block at %s; merge them.", hcSeen))
				continue
			}
			hcSeen = blk.DefRange.Ptr()
			s.HealthCheck = l.healthCheck(blk)
		case "origin":
			oname := blk.Labels[0]
			if err := checkName("origin", oname); err != nil {
				l.add(blk.LabelRanges[0], "Invalid origin name", err.Error())
				duplicates = true // the count checks would only repeat it
				continue
			}
			if prev, ok := originAt[oname]; ok {
				l.add(blk.DefRange, "Duplicate origin name",
					fmt.Sprintf("Site %q already has an origin named %q at %s. Origin names must be unique within a site: rename or remove one of them.", name, oname, prev))
				duplicates = true
				continue
			}
			originAt[oname] = blk.DefRange
			if o := l.origin(blk); o != nil {
				s.Origins = append(s.Origins, o)
			}
		}
	}
	sb.duplicates = duplicates
	l.cfg.Sites = append(l.cfg.Sites, s)
	l.siteBlocks = append(l.siteBlocks, sb)
	if l.noisy != nil && l.saidSoFar() != said {
		l.noisy[s] = true
	}
}

// MaxNameLength bounds a site's and an origin's name.
const MaxNameLength = 63

// checkName checks a site's or an origin's name: 1 to MaxNameLength ASCII
// letters, digits, '-', '_' and '.', beginning with a letter or a digit.
// Every interface can carry such a name as it is: a path segment of the
// API (/v1/sites/NAME/origins/NAME), a label value of the metrics, a key
// of the state store (etcd keys are paths), a word of the HAProxy and
// nginx configuration vigil-node writes, a DNS label. A '/' or a '..'
// could not be addressed, and a space or a line break would change what
// those files say.
func checkName(kind, name string) error {
	ok := name != "" && len(name) <= MaxNameLength && isAlnum(name[0])
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = isAlnum(c) || c == '-' || c == '_' || c == '.'
	}
	if ok {
		return nil
	}
	example := `"www" or "shop-eu.2"`
	if kind == "origin" {
		example = `"a1" or "paris-2.backup"`
	}
	return fmt.Errorf("%s name %q cannot be used: write 1 to %d letters, digits, '-', '_' or '.', beginning with a letter or a digit, such as %s. The name goes into the API's paths (/v1/sites/NAME), the metrics, the state store and the edge configuration vigil-node writes, which cannot all carry other characters", kind, name, MaxNameLength, example)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func checkHostname(h string) error {
	if h == "" {
		return fmt.Errorf("hostname must not be empty: write the site's DNS name, such as \"www.example.com\"")
	}
	if strings.Contains(h, "://") || strings.ContainsAny(h, "/?#@ :") {
		return fmt.Errorf("hostname %q is not a bare DNS name: write only the name, such as \"www.example.com\", with no scheme, port or path", h)
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("hostname %q has an empty or over-long label: write a DNS name such as \"www.example.com\"", h)
		}
	}
	return nil
}

func (l *loader) origin(b *hcl.Block) *Origin {
	content, diags := b.Body.Content(originSchema)
	l.diags = append(l.diags, diags...)
	o := &Origin{Name: b.Labels[0], Level: 1, Enabled: true, DeclRange: b.DefRange}
	if attr := content.Attributes["address"]; attr != nil {
		var addr string
		if l.decode(attr, &addr) {
			if _, err := checkAddress(addr); err != nil {
				l.add(attr.Expr.Range(), "Invalid origin address", err.Error())
			} else {
				o.Address = addr
			}
		}
	}
	l.integer(content.Attributes, "level", 1, &o.Level)
	l.boolean(content.Attributes, "enabled", &o.Enabled)
	return o
}

func checkAddress(addr string) (*url.URL, error) {
	const example = "such as \"https://203.0.113.10\" or \"http://origin.example.net:8080\""
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("address %q is not an absolute http or https URL; write a scheme and a host, %s", addr, example)
	}
	if u.User != nil {
		return nil, fmt.Errorf("address %q contains credentials; remove the user:password@ part (probes send no credentials)", u.Redacted())
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("address %q has a path, query or fragment; write only scheme, host and optional port, %s (the probe path goes in health_check { path })", addr, example)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("address %q has no host, %s", addr, example)
	}
	u.Path = ""
	return u, nil
}

// siteSources checks a site's `sources` list and returns it in chain order.
func (l *loader) siteSources(attr *hcl.Attribute, names, declared []string) []string {
	if len(names) == 0 {
		l.add(attr.Expr.Range(), "Empty sources list",
			"sources must name at least one declared source; remove the attribute to use every source.")
		return nil
	}
	want := map[string]bool{}
	ok := true
	for _, n := range names {
		if want[n] {
			l.add(attr.Expr.Range(), "Source listed twice",
				fmt.Sprintf("sources lists %q more than once; list each source once.", n))
			ok = false
			continue
		}
		want[n] = true
		if !contains(declared, n) {
			detail := fmt.Sprintf("sources names %q, but no source block of that name is declared. Declared sources: %s.", n, quoteList(declared))
			if s := suggest(n, declared); s != "" {
				detail = fmt.Sprintf("sources names %q, but no source block of that name is declared. Did you mean %q?", n, s)
			}
			l.add(attr.Expr.Range(), "Unknown source", detail)
			ok = false
		}
	}
	if !ok {
		return nil
	}
	var out []string
	for _, d := range declared {
		if want[d] {
			out = append(out, d)
		}
	}
	return out
}
