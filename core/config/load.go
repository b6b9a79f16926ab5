package config

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
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

// Load reads a configuration file, or every *.hcl file of a folder (merged
// in file-name order). The diagnostics say what is wrong, with
// file:line:col; warnings may come with a valid configuration.
//
// The Config is never nil. When the diagnostics hold an error it carries
// only Files (the sources read, for config.WriteDiagnostics to print the
// lines at fault) and must not be used otherwise; without an error it is
// the whole configuration.
//
// The blocks are decoded by the files named after them: control.go,
// source.go, site.go and healthcheck.go, notify.go, publish.go, store.go.
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
	cfg, diags, _ := parseIndexed(files)
	return cfg, diags
}

// parseIndexed is parse, with the index of the files' blocks a later load
// may use (reparse.go); nil when the files are not valid.
func parseIndexed(files []fileSource) (*Config, hcl.Diagnostics, *blockIndex) {
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
		return &Config{Files: fileMap}, diags, nil
	}
	cfg, diags, notes := assemble(files, parsed, nil)
	if diags.HasErrors() {
		return cfg, diags, nil
	}
	spans := make([][]fileSpan, len(files))
	for i, f := range files {
		spans[i] = spansOf(f.src)
	}
	return cfg, diags, indexBlocks(files, spans, cfg, notes)
}

// loadNotes are what a later load needs to know of how the sites were
// decoded (reparse.go).
type loadNotes struct {
	// noisy are the sites whose decoding added a diagnostic.
	noisy map[*Site]bool
	// defaultHC is the health check of the sites without a block.
	defaultHC *HealthCheck
}

// assemble decodes the parsed files' blocks (and the sites taken again,
// reparse.go) into a Config. defaultHC, when set, is the health check of
// the sites without a health_check block (that of the sites taken again).
func assemble(files []fileSource, parsed []parsedFile, defaultHC *HealthCheck) (*Config, hcl.Diagnostics, loadNotes) {
	fileMap := make(map[string]*hcl.File, len(files))
	// Diagnostics need a file's bytes and which block holds an offset, not
	// its syntax tree, which would cost kilobytes per site for as long as
	// the configuration is in force.
	for i, pf := range parsed {
		fileMap[files[i].name] = &hcl.File{Bytes: files[i].src, Nav: newTopNav(pf.bodies)}
	}
	l := &loader{cfg: &Config{Files: fileMap}, noisy: map[*Site]bool{}, defaultHC: defaultHC}
	for _, pf := range parsed {
		for _, b := range pf.bodies {
			l.file(b)
		}
	}
	l.finish()
	if l.diags.HasErrors() {
		return &Config{Files: fileMap}, l.diags, loadNotes{}
	}
	return l.cfg, l.diags, loadNotes{noisy: l.noisy, defaultHC: l.defaultHC}
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
	// historyAt and metricsAt are where control { history } and
	// control { metrics } were declared.
	historyAt, metricsAt *hcl.Range
	// noisy are the sites whose decoding added a diagnostic: a later
	// load must decode them again to repeat it (reparse.go).
	noisy map[*Site]bool
}

// saidSoFar counts the diagnostics added, capped ones included.
func (l *loader) saidSoFar() int {
	n := len(l.diags)
	for _, c := range l.capped {
		n += c.n
	}
	return n
}

// reuse adds a site taken again from the last load (reparse.go).
func (l *loader) reuse(s *Site) {
	if prev, ok := l.siteAt[s.Name]; ok {
		l.add(s.DeclRange, "Duplicate site name",
			fmt.Sprintf("A site named %q was already declared at %s. Site names must be unique: rename or remove one of them.", s.Name, prev))
		return
	}
	l.siteAt[s.Name] = s.DeclRange
	l.cfg.Sites = append(l.cfg.Sites, s)
	l.siteBlocks = append(l.siteBlocks, siteBlock{site: s, reused: true})
}

type siteBlock struct {
	site        *Site
	sourcesAttr *hcl.Attribute
	duplicates  bool // a duplicate origin was reported: skip the count checks
	// reused: the site was taken again from the last load (reparse.go),
	// its sources resolved already; it is shared and must not change.
	reused bool
}

func (l *loader) file(body hcl.Body) {
	if l.sourceAt == nil {
		l.sourceAt, l.siteAt, l.notifyAt = map[string]hcl.Range{}, map[string]hcl.Range{}, map[string]hcl.Range{}
		l.cfg.Control = Control{
			RoundInterval: DefaultRoundInterval, SitesPerRound: DefaultSitesPerRound, ConfirmBudget: DefaultConfirmBudget,
			DataDir: DefaultDataDir, PluginDir: DefaultPluginDir,
			API: API{Listen: DefaultAPIListen, ReadAccess: "open"},
		}
	}
	if r, ok := body.(*reusedSite); ok {
		l.reuse(r.site)
		return
	}
	content, diags := body.Content(rootSchema)
	l.diags = append(l.diags, diags...)
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

// finish checks the rules that need the whole configuration.
func (l *loader) finish() {
	defer l.dnsWarnings()
	defer l.flushCapped()
	l.budget()
	l.historyDefault()
	l.checkConfirm()
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
		switch attr := sb.sourcesAttr; {
		case sb.reused:
			// Taken again, decoded with the same sources: its list stands.
		case attr != nil:
			var names []string
			if l.decode(attr, &names) {
				s.Sources = l.siteSources(attr, names, declared)
			}
		default:
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
