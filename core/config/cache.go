package config

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
)

func tallyOf(t uint8) vote.Tally         { return vote.Tally(t) }
func durationOf(ns int64) time.Duration  { return time.Duration(ns) }
func failbackOf(f uint8) decide.Failback { return decide.Failback(f) }

// CacheFileName is the decoded configuration LoadCached keeps in data_dir.
const CacheFileName = "config.cache"

// cacheFormat changes whenever what the loader produces changes: a cache
// of another format is ignored.
const cacheFormat = "vigil-config-cache-4"

// LoadCached is Load for the agent, which may start with 100,000 sites:
// parsing that much HCL takes seconds, so the decoded configuration is
// kept in data_dir (config.cache) and used again when every file, and
// every CA bundle they name, is byte for byte what it was. Anything else
// (a changed file, another vigil build, a damaged cache) loads the files
// anew and replaces the cache. The result and the diagnostics are exactly
// Load's.
func LoadCached(path string) (*Config, hcl.Diagnostics) {
	files, diags := readFiles(path)
	if diags.HasErrors() {
		return &Config{}, diags
	}
	key := cacheKey(files)
	cacheDir := dataDirOf(files)
	if cfg, diags, ok := readCache(filepath.Join(cacheDir, CacheFileName), key, files); ok {
		return cfg, diags
	}
	cfg, diags := parse(files)
	if !diags.HasErrors() {
		_ = writeCache(cacheDir, key, cfg, diags) // a cache that cannot be written only costs the next start time
	}
	return cfg, diags
}

// cacheKey names the files' content and this build of vigil.
func cacheKey(files []fileSource) string {
	h := sha256.New()
	h.Write([]byte(cacheFormat))
	if bi, ok := debug.ReadBuildInfo(); ok {
		h.Write([]byte(bi.Main.Version))
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				h.Write([]byte(s.Key + s.Value))
			}
		}
	}
	for _, f := range files {
		fmt.Fprintf(h, "%d:%s:%d:", len(f.name), f.name, len(f.src))
		h.Write(f.src)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// dataDirOf finds control { data_dir } without parsing every file: it
// parses the top-level control blocks only. It returns the default when
// there is none, or when the value is not a plain string.
func dataDirOf(files []fileSource) string {
	dir := DefaultDataDir
	for _, f := range files {
		for _, at := range blockStarts(f.src) {
			if !bytes.HasPrefix(f.src[at.start:], []byte("control")) {
				continue
			}
			file, diags := hclsyntax.ParseConfig(f.src[at.start:at.end], f.name, hcl.Pos{Line: 1, Column: 1})
			if diags.HasErrors() {
				return dir
			}
			content, _, _ := file.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "control"}}})
			for _, b := range content.Blocks {
				attrs, _ := b.Body.JustAttributes()
				if a := attrs["data_dir"]; a != nil {
					v, d := a.Expr.Value(nil)
					if d.HasErrors() || v.Type() != cty.String || v.IsNull() || !v.IsKnown() {
						return DefaultDataDir
					}
					dir = v.AsString()
				}
			}
		}
	}
	return dir
}

type span struct{ start, end int }

// blockStarts cuts src at every top-level block boundary (see
// splitPoints).
func blockStarts(src []byte) []span {
	pts := splitPoints(src, 1)
	out := make([]span, len(pts))
	for i, p := range pts {
		end := len(src)
		if i+1 < len(pts) {
			end = pts[i+1].Byte
		}
		out[i] = span{p.Byte, end}
	}
	return out
}

// The cache's own types: a Config without its HCL bodies, with the
// shared values (health checks, source lists) stored once.
type cacheFile struct {
	Format, Key string
	CAs         []cachedCA
	Control     Control
	Sources     []cachedSource
	HCs         []HealthCheck
	Lists       [][]string
	Sites       []cachedSite
	Notifiers   []*Notifier
	DNS         *DNSPublisher
	Diags       []cachedDiag
	Nav         map[string][]navBlockC
}

type cachedCA struct {
	Path string
	Sum  [32]byte
}

type cachedSource struct {
	Name, Plugin, Checksum string
	MinVotes               int
	Tally                  uint8
	Timeout                int64
	TimeoutSet             bool
	TimeoutRange           hcl.Range
	Env                    []string
	HasConfig              bool
	ConfigRange            hcl.Range // the body, braces included
	ConfigText             string
	DeclRange              hcl.Range
}

type cachedSite struct {
	Name, Hostname string
	Failback       uint8
	Sources, HC    int
	Origins        []Origin
	DeclRange      hcl.Range
}

type cachedDiag struct {
	Severity         int
	Summary, Detail  string
	Subject, Context *hcl.Range
}

type navBlockC struct {
	Start, End int
	Type       string
	Labels     []string
}

func writeCache(dir, key string, cfg *Config, diags hcl.Diagnostics) error {
	if err := os.MkdirAll(dir, 0o750); err != nil { // as the store does: it is the agent's folder
		return err
	}
	c := cacheFile{Format: cacheFormat, Key: key, Control: cfg.Control, Notifiers: cfg.Notifiers, DNS: cfg.DNS,
		Nav: map[string][]navBlockC{}}
	for name, f := range cfg.Files {
		if n, ok := f.Nav.(*topNav); ok {
			for _, b := range n.blocks {
				c.Nav[name] = append(c.Nav[name], navBlockC{b.start, b.end, b.typ, b.labels})
			}
		}
	}
	for _, s := range cfg.Sources {
		cs := cachedSource{Name: s.Name, Plugin: s.Plugin, Checksum: s.Checksum, MinVotes: s.MinVotes, Tally: uint8(s.Tally),
			Timeout: int64(s.Timeout), TimeoutSet: s.TimeoutSet, TimeoutRange: s.TimeoutRange, Env: s.Env,
			ConfigText: s.ConfigText, DeclRange: s.DeclRange}
		if sb, ok := s.Config.(*hclsyntax.Body); ok {
			cs.HasConfig, cs.ConfigRange = true, sb.SrcRange
		} else if s.Config != nil {
			return errors.New("a source config block of another syntax")
		}
		c.Sources = append(c.Sources, cs)
	}
	hcs := map[*HealthCheck]int{}
	lists := map[*string]int{}
	cas := map[string]bool{}
	for _, s := range cfg.Sites {
		hi, ok := hcs[s.HealthCheck]
		if !ok {
			hi = len(c.HCs)
			hcs[s.HealthCheck] = hi
			c.HCs = append(c.HCs, *s.HealthCheck)
			if s.HealthCheck.CAFile != "" {
				full := s.HealthCheck.CAFile
				if !filepath.IsAbs(full) {
					full = filepath.Join(filepath.Dir(s.DeclRange.Filename), full)
				}
				cas[full] = true
			}
		}
		li := -1
		if len(s.Sources) > 0 {
			var ok bool
			if li, ok = lists[&s.Sources[0]]; !ok {
				li = len(c.Lists)
				lists[&s.Sources[0]] = li
				c.Lists = append(c.Lists, s.Sources)
			}
		}
		cs := cachedSite{Name: s.Name, Hostname: s.Hostname, Failback: uint8(s.Failback), Sources: li, HC: hi,
			Origins: make([]Origin, len(s.Origins)), DeclRange: s.DeclRange}
		for i, o := range s.Origins {
			cs.Origins[i] = *o
		}
		c.Sites = append(c.Sites, cs)
	}
	for p := range cas {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		c.CAs = append(c.CAs, cachedCA{Path: p, Sum: sha256.Sum256(b)})
	}
	for _, d := range diags {
		c.Diags = append(c.Diags, cachedDiag{Severity: int(d.Severity), Summary: d.Summary, Detail: d.Detail, Subject: d.Subject, Context: d.Context})
	}
	tmp, err := os.CreateTemp(dir, CacheFileName+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 1<<20)
	if err := gob.NewEncoder(w).Encode(&c); err != nil {
		tmp.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, CacheFileName))
}

// readCache rebuilds the configuration from the cache at path when it was
// made from exactly these files.
func readCache(path, key string, files []fileSource) (*Config, hcl.Diagnostics, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, false
	}
	defer f.Close()
	var c cacheFile
	if err := gob.NewDecoder(bufio.NewReaderSize(f, 1<<20)).Decode(&c); err != nil || c.Format != cacheFormat || c.Key != key {
		return nil, nil, false
	}
	for _, ca := range c.CAs {
		b, err := os.ReadFile(ca.Path)
		if err != nil || sha256.Sum256(b) != ca.Sum {
			return nil, nil, false
		}
	}
	cfg := &Config{Control: c.Control, Notifiers: c.Notifiers, DNS: c.DNS, Files: make(map[string]*hcl.File, len(files))}
	for _, fs := range files {
		nav := &topNav{}
		for _, b := range c.Nav[fs.name] {
			nav.blocks = append(nav.blocks, navBlock{b.Start, b.End, b.Type, b.Labels})
		}
		cfg.Files[fs.name] = &hcl.File{Bytes: fs.src, Nav: nav}
	}
	for _, cs := range c.Sources {
		s := &Source{Name: cs.Name, Plugin: cs.Plugin, Checksum: cs.Checksum, MinVotes: cs.MinVotes, Tally: tallyOf(cs.Tally),
			Timeout: durationOf(cs.Timeout), TimeoutSet: cs.TimeoutSet, TimeoutRange: cs.TimeoutRange, Env: cs.Env,
			ConfigText: cs.ConfigText, DeclRange: cs.DeclRange}
		if cs.HasConfig {
			body, ok := reparseBody(cfg.Files, cs.ConfigRange)
			if !ok {
				return nil, nil, false
			}
			s.Config = body
		}
		cfg.Sources = append(cfg.Sources, s)
	}
	hcs := make([]*HealthCheck, len(c.HCs))
	for i := range c.HCs {
		hcs[i] = &c.HCs[i]
	}
	origins := 0
	for _, cs := range c.Sites {
		origins += len(cs.Origins)
	}
	all := make([]Origin, 0, origins) // one allocation for every origin
	cfg.Sites = make([]*Site, len(c.Sites))
	siteMem := make([]Site, len(c.Sites))
	for i, cs := range c.Sites {
		if cs.HC < 0 || cs.HC >= len(hcs) || cs.Sources >= len(c.Lists) {
			return nil, nil, false
		}
		s := &siteMem[i]
		*s = Site{Name: cs.Name, Hostname: cs.Hostname, Failback: failbackOf(cs.Failback), HealthCheck: hcs[cs.HC], DeclRange: cs.DeclRange}
		if cs.Sources >= 0 {
			s.Sources = c.Lists[cs.Sources]
		}
		s.Origins = make([]*Origin, len(cs.Origins))
		for j := range cs.Origins {
			all = append(all, cs.Origins[j])
			s.Origins[j] = &all[len(all)-1]
		}
		cfg.Sites[i] = s
	}
	var diags hcl.Diagnostics
	for _, d := range c.Diags {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagnosticSeverity(d.Severity), Summary: d.Summary, Detail: d.Detail, Subject: d.Subject, Context: d.Context})
	}
	return cfg, diags, true
}

// reparseBody parses a source's config block again from its range in the
// file, braces included, so that its attributes keep their file:line.
func reparseBody(files map[string]*hcl.File, r hcl.Range) (hcl.Body, bool) {
	f := files[r.Filename]
	if f == nil || r.End.Byte > len(f.Bytes) || r.Start.Byte >= r.End.Byte {
		return nil, false
	}
	inner := hcl.Pos{Line: r.Start.Line, Column: r.Start.Column + 1, Byte: r.Start.Byte + 1}
	file, diags := hclsyntax.ParseConfig(f.Bytes[r.Start.Byte+1:r.End.Byte-1], r.Filename, inner)
	if diags.HasErrors() {
		return nil, false
	}
	body := file.Body.(*hclsyntax.Body)
	body.SrcRange = r
	return body, true
}
