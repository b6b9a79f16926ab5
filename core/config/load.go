package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
)

var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "control"},
		{Type: "source", LabelNames: []string{"name"}},
		{Type: "site", LabelNames: []string{"name"}},
		{Type: "notify", LabelNames: []string{"kind", "name"}},
		{Type: "publish", LabelNames: []string{"kind"}},
	},
}

var dnsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "listen", Required: true}, {Name: "zone", Required: true}, {Name: "ttl"},
		{Name: "ns"}, {Name: "fail_closed"},
	},
}

var controlSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "round_interval"}, {Name: "sites_per_round"}, {Name: "data_dir"}, {Name: "plugin_dir"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "api"}, {Type: "store", LabelNames: []string{"kind"}}},
}

var apiSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "listen"}, {Name: "token_env"}, {Name: "token_file"}, {Name: "read_access"},
	},
}

var sourceSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "plugin", Required: true}, {Name: "min_votes"}, {Name: "tally"}, {Name: "timeout"},
		{Name: "checksum"}, {Name: "env"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "config"}},
}

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

// Load reads a configuration file, or every *.hcl file of a folder (merged
// in file-name order). The diagnostics say what is wrong, with file:line:col;
// the Config is nil when there is any error.
func Load(path string) (*Config, hcl.Diagnostics) {
	files, diags := readFiles(path)
	if diags.HasErrors() {
		return &Config{}, diags
	}
	return parse(files)
}

// readFiles reads the configuration file, or every *.hcl file of a folder
// in file-name order.
func readFiles(path string) ([]fileSource, hcl.Diagnostics) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read configuration",
			Detail:   fmt.Sprintf("%v. Pass -config a .hcl file or a folder of .hcl files.", err),
		}}
	}
	var names []string
	if info.IsDir() {
		matches, err := filepath.Glob(filepath.Join(path, "*.hcl"))
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot list configuration folder", Detail: err.Error()}}
		}
		sort.Strings(matches)
		if len(matches) == 0 {
			return nil, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "No configuration files",
				Detail:   fmt.Sprintf("The folder %s has no *.hcl file. Put the configuration in files ending in .hcl.", path),
			}}
		}
		names = matches
	} else {
		names = []string{path}
	}
	files := make([]fileSource, 0, len(names))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read configuration file", Detail: err.Error()}}
		}
		files = append(files, fileSource{name: n, src: b})
	}
	return files, nil
}

// Parse reads a configuration from memory, as if from one file named
// filename.
func Parse(filename string, src []byte) (*Config, hcl.Diagnostics) {
	return parse([]fileSource{{name: filename, src: src}})
}

type fileSource struct {
	name string
	src  []byte
}

func parse(files []fileSource) (*Config, hcl.Diagnostics) {
	// Files (and the chunks of a large one) parse concurrently.
	parsed := make([]parsedFile, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() { parsed[i] = parseFile(f.name, f.src) })
	}
	wg.Wait()
	var diags hcl.Diagnostics
	fileMap := make(map[string]*hcl.File, len(files))
	for i, pf := range parsed {
		diags = append(diags, pf.diags...)
		fileMap[files[i].name] = pf.file
	}
	if diags.HasErrors() {
		return &Config{Files: fileMap}, diags
	}
	// Diagnostics need a file's bytes and which block holds an offset, not
	// its syntax tree, which would cost kilobytes per site for as long as
	// the configuration is in force.
	for i, pf := range parsed {
		fileMap[files[i].name] = &hcl.File{Bytes: files[i].src, Nav: newTopNav(pf.bodies)}
	}
	l := &loader{cfg: &Config{Files: fileMap}}
	for _, pf := range parsed {
		for _, b := range pf.bodies {
			l.file(b)
		}
	}
	l.finish()
	if l.diags.HasErrors() {
		return &Config{Files: fileMap}, l.diags
	}
	return l.cfg, l.diags
}

type loader struct {
	decoder
	cfg        *Config
	controlAt  *hcl.Range
	sourceAt   map[string]hcl.Range
	siteAt     map[string]hcl.Range
	notifyAt   map[string]hcl.Range
	siteBlocks []siteBlock
	// defaultHC is shared by the sites without a health_check block.
	defaultHC *HealthCheck
	// caFiles caches the CA bundles read, by path.
	caFiles map[string]caFile
	// capped counts the diagnostics of a kind beyond cappedLimit.
	capped map[string]*cappedDiags
}

type siteBlock struct {
	site        *Site
	sourcesAttr *hcl.Attribute
	duplicates  bool // a duplicate origin was reported: skip the count checks
}

func (l *loader) file(body hcl.Body) {
	content, diags := body.Content(rootSchema)
	l.diags = append(l.diags, diags...)
	if l.sourceAt == nil {
		l.sourceAt, l.siteAt, l.notifyAt = map[string]hcl.Range{}, map[string]hcl.Range{}, map[string]hcl.Range{}
		l.cfg.Control = Control{
			RoundInterval: DefaultRoundInterval, SitesPerRound: DefaultSitesPerRound,
			DataDir: DefaultDataDir, PluginDir: DefaultPluginDir,
			API: API{Listen: DefaultAPIListen, ReadAccess: "open"},
		}
	}
	for _, b := range content.Blocks {
		switch b.Type {
		case "control":
			if l.controlAt != nil {
				l.add(b.DefRange, "Duplicate control block",
					fmt.Sprintf("A control block was already declared at %s. Merge the two into one control block.", l.controlAt))
				continue
			}
			l.controlAt = b.DefRange.Ptr()
			l.control(b)
		case "source":
			l.source(b)
		case "site":
			l.site(b)
		case "notify":
			l.notify(b)
		case "publish":
			l.publish(b)
		}
	}
}

func (l *loader) control(b *hcl.Block) {
	content, diags := b.Body.Content(controlSchema)
	l.diags = append(l.diags, diags...)
	c := &l.cfg.Control
	l.duration(content.Attributes, "round_interval", &c.RoundInterval)
	l.integer(content.Attributes, "sites_per_round", 1, &c.SitesPerRound)
	l.nonEmpty(content.Attributes, "data_dir", &c.DataDir)
	l.nonEmpty(content.Attributes, "plugin_dir", &c.PluginDir)
	for _, ab := range content.Blocks {
		if ab.Type == "store" {
			l.store(ab)
			continue
		}
		ac, diags := ab.Body.Content(apiSchema)
		l.diags = append(l.diags, diags...)
		l.nonEmpty(ac.Attributes, "listen", &c.API.Listen)
		l.str(ac.Attributes, "token_env", &c.API.TokenEnv)
		l.str(ac.Attributes, "token_file", &c.API.TokenFile)
		if attr := ac.Attributes["read_access"]; attr != nil {
			var s string
			if l.decode(attr, &s) {
				if s != "open" && s != "token" {
					l.add(attr.Expr.Range(), "Invalid read_access",
						fmt.Sprintf("read_access must be \"open\" (reads need no token) or \"token\"; got %q.", s))
				} else {
					c.API.ReadAccess = s
				}
			}
		}
	}
}

// nonEmpty reads a string that must not be empty.
func (l *loader) nonEmpty(attrs hcl.Attributes, name string, into *string) {
	attr := attrs[name]
	var s string
	if !l.decode(attr, &s) {
		return
	}
	if strings.TrimSpace(s) == "" {
		l.add(attr.Expr.Range(), fmt.Sprintf("Empty %s", name), fmt.Sprintf("%s must not be empty; remove it to use the default.", name))
		return
	}
	*into = s
}

func (l *loader) source(b *hcl.Block) {
	name := b.Labels[0]
	if prev, ok := l.sourceAt[name]; ok {
		l.add(b.DefRange, "Duplicate source name",
			fmt.Sprintf("A source named %q was already declared at %s. Source names must be unique: rename or remove one of them.", name, prev))
		return
	}
	l.sourceAt[name] = b.DefRange
	content, diags := b.Body.Content(sourceSchema)
	l.diags = append(l.diags, diags...)
	s := &Source{Name: name, MinVotes: 1, Tally: vote.TallyOwn, DeclRange: b.DefRange}
	l.nonEmpty(content.Attributes, "plugin", &s.Plugin)
	l.integer(content.Attributes, "min_votes", 1, &s.MinVotes)
	if attr := content.Attributes["tally"]; attr != nil {
		var t string
		if l.decode(attr, &t) {
			if v, err := vote.ParseTally(t); err != nil {
				l.add(attr.Expr.Range(), "Invalid tally",
					fmt.Sprintf("tally must be \"own\" (judge on this source's votes alone) or \"carry\" (judge on every vote cast so far this round); got %q.", t))
			} else {
				s.Tally = v
			}
		}
	}
	if attr := content.Attributes["timeout"]; attr != nil {
		s.TimeoutSet, s.TimeoutRange = true, attr.Expr.Range()
		l.duration(content.Attributes, "timeout", &s.Timeout)
	}
	if attr := content.Attributes["checksum"]; attr != nil {
		var c string
		if l.decode(attr, &c) {
			if !validChecksum(c) {
				l.add(attr.Expr.Range(), "Invalid checksum",
					"checksum must be \"sha256:\" followed by 64 hexadecimal digits, as printed by `sha256sum PLUGIN`.")
			} else {
				s.Checksum = c
			}
		}
	}
	l.strList(content.Attributes, "env", &s.Env)
	for _, cb := range content.Blocks {
		if s.Config != nil {
			l.add(cb.DefRange, "Duplicate config block", "A source has at most one config block; merge them.")
			continue
		}
		s.Config = cb.Body
		s.ConfigText = blockText(l.cfg.Files, cb.Body)
	}
	l.cfg.Sources = append(l.cfg.Sources, s)
}

func validChecksum(c string) bool {
	hex, ok := strings.CutPrefix(c, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, r := range hex {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

func (l *loader) site(b *hcl.Block) {
	name := b.Labels[0]
	if prev, ok := l.siteAt[name]; ok {
		l.add(b.DefRange, "Duplicate site name",
			fmt.Sprintf("A site named %q was already declared at %s. Site names must be unique: rename or remove one of them.", name, prev))
		return
	}
	l.siteAt[name] = b.DefRange
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

// finish checks the rules that need the whole configuration.
func (l *loader) finish() {
	defer l.dnsWarnings()
	defer l.flushCapped()
	l.budget()
	l.shareHealthChecks()
	declared := make([]string, len(l.cfg.Sources))
	for i, s := range l.cfg.Sources {
		declared[i] = s.Name
	}
	if len(declared) > vote.MaxSources {
		l.add(l.cfg.Sources[vote.MaxSources].DeclRange, "Too many sources",
			fmt.Sprintf("A vote chain has at most %d sources; this configuration declares %d.", vote.MaxSources, len(declared)))
	}
	for _, sb := range l.siteBlocks {
		s := sb.site
		if attr := sb.sourcesAttr; attr != nil {
			var names []string
			if l.decode(attr, &names) {
				s.Sources = l.siteSources(attr, names, declared)
			}
		} else {
			s.Sources = declared
		}
		if len(s.Origins) == 0 {
			l.add(s.DeclRange, "Site has no origins",
				fmt.Sprintf("Site %q needs at least one origin block, such as origin \"a1\" { address = \"https://203.0.113.10\" }.", s.Name))
			continue
		}
		enabled := 0
		for _, o := range s.Origins {
			if o.Enabled {
				enabled++
			}
		}
		if s.HealthCheck.Enabled && enabled < 2 && !sb.duplicates {
			l.add(s.DeclRange, "Health checks need at least two enabled origins",
				fmt.Sprintf("Site %q has health checks enabled but %d enabled origin(s): with one origin there is nothing to switch to. Add an enabled origin, or set health_check { enabled = false }.", s.Name, enabled))
		}
		if s.HealthCheck.Enabled && len(declared) == 0 {
			l.add(s.DeclRange, "No vote sources",
				fmt.Sprintf("Site %q has health checks enabled but no source block is declared, so nothing can vote. Declare a source, such as source \"direct\" { plugin = \"vigil-source-direct\" }.", s.Name))
		}
		l.probeFits(s)
	}
}

// dnsWarnings warns when the DNS TTL outlives a site's detection time
// (unhealthy_threshold x round_interval): resolvers would keep a dead
// answer longer than vigil needs to notice the failure.
func (l *loader) dnsWarnings() {
	d := l.cfg.DNS
	if d == nil {
		return
	}
	ttl := time.Duration(d.TTL) * time.Second
	for _, s := range l.cfg.Sites {
		if !s.HealthCheck.Enabled || !inZone(s.Hostname, d.Zone) {
			continue
		}
		detect := time.Duration(s.HealthCheck.UnhealthyThreshold) * l.cfg.Control.RoundInterval
		if ttl > detect {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "DNS TTL longer than failure detection",
				Detail: fmt.Sprintf("ttl is %s but site %q detects a failure in %s (unhealthy_threshold %d x round_interval %s): resolvers may keep serving a dead origin for up to %s after vigil notices. Lower ttl to %d or less.",
					ttl, s.Name, detect, s.HealthCheck.UnhealthyThreshold, l.cfg.Control.RoundInterval, ttl-detect, int(detect.Seconds())),
				Subject: d.DeclRange.Ptr(),
			})
		}
	}
}

func inZone(host, zone string) bool {
	host = strings.TrimSuffix(host, ".") + "."
	return host == zone || strings.HasSuffix(host, "."+zone)
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func quoteList(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// suggest returns the candidate closest to s, if it is close enough to be a
// likely typo.
func suggest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := levenshtein.Distance(s, c, nil); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func (l *loader) publish(b *hcl.Block) {
	kind := b.Labels[0]
	if kind != "dns" {
		l.add(b.LabelRanges[0], "Unknown publisher kind",
			fmt.Sprintf("Publisher kind %q is not known; the kinds are \"dns\". (Nodes follow the publication through the API without a block.)", kind))
		return
	}
	if l.cfg.DNS != nil {
		l.add(b.DefRange, "Duplicate publish \"dns\" block",
			fmt.Sprintf("A publish \"dns\" block was already declared at %s; merge them.", l.cfg.DNS.DeclRange))
		return
	}
	content, diags := b.Body.Content(dnsSchema)
	l.diags = append(l.diags, diags...)
	d := &DNSPublisher{TTL: 30, DeclRange: b.DefRange}
	l.nonEmpty(content.Attributes, "listen", &d.Listen)
	if attr := content.Attributes["zone"]; attr != nil {
		var z string
		if l.decode(attr, &z) {
			if err := checkHostname(strings.TrimSuffix(z, ".")); err != nil || !strings.HasSuffix(z, ".") {
				l.add(attr.Expr.Range(), "Invalid zone",
					fmt.Sprintf("zone must be a fully qualified DNS name ending in a dot, such as \"cdn.example.net.\"; got %q.", z))
			} else {
				d.Zone = strings.ToLower(z)
			}
		}
	}
	l.integer(content.Attributes, "ttl", 0, &d.TTL)
	if attr := content.Attributes["ns"]; attr != nil {
		var ns []string
		if l.decode(attr, &ns) {
			for _, n := range ns {
				if !strings.HasSuffix(n, ".") || checkHostname(strings.TrimSuffix(n, ".")) != nil {
					l.add(attr.Expr.Range(), "Invalid name server",
						fmt.Sprintf("ns entries must be fully qualified names ending in a dot, such as \"ns1.cdn.example.net.\"; got %q.", n))
					ns = nil
					break
				}
			}
			d.NS = ns
		}
	}
	l.boolean(content.Attributes, "fail_closed", &d.FailClosed)
	l.cfg.DNS = d
}

// blockText is the source text of a block's body, between its braces.
func blockText(files map[string]*hcl.File, body hcl.Body) string {
	sb, ok := body.(*hclsyntax.Body)
	if !ok {
		return ""
	}
	r := sb.SrcRange
	f := files[r.Filename]
	if f == nil || r.End.Byte > len(f.Bytes) || r.Start.Byte+1 > r.End.Byte-1 {
		return ""
	}
	return string(f.Bytes[r.Start.Byte+1 : r.End.Byte-1])
}
