package config

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"weak"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// CacheFileName is the decoded configuration LoadCached keeps in data_dir.
const CacheFileName = "config.cache"

// cacheMagic starts every cache file.
const cacheMagic = "vigil decoded configuration\n"

// LoadCached is Load for the agent, which may start with 100,000 sites:
// parsing that much HCL takes seconds, so the decoded configuration is
// kept in data_dir (config.cache) and used again when every file, and
// every CA bundle they name, is byte for byte what it was, and the vigil
// binary is the one that wrote it. Anything else (a changed file, another
// build, a damaged cache) loads the files anew and replaces the cache. The
// result and the diagnostics are exactly Load's.
//
// The cache holds the Config itself, written field by field by reflection
// (cacheCodec), so a field added to any configuration type is cached
// without a word here; a field of a kind the codec cannot write fails the
// package's tests (parity_test.go).
//
// A second call with nothing changed, such as a SIGHUP of an unchanged
// configuration, returns a Config that shares every site, source and
// notifier with the one the previous call returned, as long as that one is
// still in use: no parse, no decode, no second copy in memory. A call with
// changed files, such as a SIGHUP after an edit, parses only the site
// blocks whose text is new and takes every other site from that Config
// (reparse.go), as long as nothing but site blocks changed.
func LoadCached(path string) (*Config, hcl.Diagnostics) {
	files, diags := readFiles(path)
	if diags.HasErrors() {
		return &Config{}, diags
	}
	key := cacheKey(files)
	if key == "" { // the build is unknown: a cache could outlive a change of the loader
		return parse(files)
	}
	if cfg, diags, ok := lastLoad.reuse(key, files); ok {
		return cfg, diags
	}
	cacheDir := dataDirOf(files)
	if cfg, diags, idx, err := readCache(filepath.Join(cacheDir, CacheFileName), key, files); err == nil {
		lastLoad.remember(key, cfg, diags, idx)
		return cfg, diags
	}
	// A changed file, such as at a reload: the blocks it shares with the
	// last load need not be decoded again (reparse.go).
	cfg, diags, idx, ok := lastLoad.reparse(files)
	if !ok {
		cfg, diags, idx = parseIndexed(files)
	}
	if !diags.HasErrors() {
		lastLoad.remember(key, cfg, diags, idx)
		_ = writeCache(cacheDir, key, cfg, diags, idx) // a cache that cannot be written only costs the next start time
	}
	return cfg, diags
}

// Unchanged reports whether cfg is old again: LoadCached found the
// files, the CA bundles they name and the build as they were, and cfg
// holds old's very sites, sources, notifiers and settings (a SIGHUP of an
// unchanged file). A caller may keep what it built from old. Configs
// loaded apart are unchanged only when they hold nothing but equal
// settings.
func Unchanged(old, cfg *Config) bool {
	if old == nil || cfg == nil {
		return false
	}
	a, b := reflect.ValueOf(old).Elem(), reflect.ValueOf(cfg).Elem()
	for _, i := range cachedFields(a.Type()) {
		x, y := a.Field(i), b.Field(i)
		switch x.Kind() {
		case reflect.Slice:
			if x.Len() != y.Len() || (x.Len() > 0 && x.Pointer() != y.Pointer()) {
				return false
			}
		case reflect.Pointer, reflect.Map:
			if x.Pointer() != y.Pointer() {
				return false
			}
		default:
			if !reflect.DeepEqual(x.Interface(), y.Interface()) {
				return false
			}
		}
	}
	return true
}

// lastLoad is what LoadCached returned last, held weakly: it keeps no
// configuration alive that its caller dropped.
var lastLoad loadMemo

type loadMemo struct {
	mu    sync.Mutex
	key   string
	cfg   weak.Pointer[Config]
	diags hcl.Diagnostics
	cas   []cachedCA
	// idx describes the files cfg was loaded from, for reparse.
	idx *blockIndex
	// reused counts the sites the last reparse took again (for tests).
	reused int
}

func (m *loadMemo) remember(key string, cfg *Config, diags hcl.Diagnostics, idx *blockIndex) {
	var cas []cachedCA
	var err error
	if cfg != nil {
		cas, err = caSums(cfg)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cfg == nil || err != nil {
		m.key, m.cfg, m.diags, m.cas, m.idx = "", weak.Pointer[Config]{}, nil, nil, nil
		return
	}
	m.key, m.cfg, m.diags, m.cas, m.idx = key, weak.Make(cfg), diags, cas, idx
}

// reparse loads files with what the remembered Config decoded, when it is
// still alive and the CA bundles it read are unchanged (reparse.go).
func (m *loadMemo) reparse(files []fileSource) (*Config, hcl.Diagnostics, *blockIndex, bool) {
	m.mu.Lock()
	prev, cas, idx := m.cfg.Value(), m.cas, m.idx
	m.reused = 0
	m.mu.Unlock()
	if prev == nil || idx == nil || !casUnchanged(cas) {
		return nil, nil, nil, false
	}
	cfg, diags, next, reused, ok := reparse(files, prev, idx)
	if ok {
		m.mu.Lock()
		m.reused = reused
		m.mu.Unlock()
	}
	return cfg, diags, next, ok
}

// reuse returns a Config sharing everything with the one remembered, when
// it is still alive and was loaded from exactly these files and CA bundles.
// The copy gets its own Files (the remembered one may have forgotten its
// text) and its own site index.
func (m *loadMemo) reuse(key string, files []fileSource) (*Config, hcl.Diagnostics, bool) {
	m.mu.Lock()
	if m.key != key {
		m.mu.Unlock()
		return nil, nil, false
	}
	prev, diags, cas := m.cfg.Value(), m.diags, m.cas
	m.mu.Unlock()
	if prev == nil || !casUnchanged(cas) {
		return nil, nil, false
	}
	cfg := &Config{}
	copyExported(reflect.ValueOf(cfg).Elem(), reflect.ValueOf(prev).Elem())
	cfg.Files = make(map[string]*hcl.File, len(files))
	for _, f := range files {
		old := prev.Files[f.name]
		if old == nil {
			return nil, nil, false
		}
		cfg.Files[f.name] = &hcl.File{Bytes: f.src, Nav: old.Nav}
	}
	// The copy is what the caller keeps from now on, and the one the next
	// call finds: the caller may drop prev.
	m.mu.Lock()
	if m.key == key {
		m.cfg = weak.Make(cfg)
	}
	m.mu.Unlock()
	return cfg, diags, true
}

// copyExported sets every exported field of dst to src's.
func copyExported(dst, src reflect.Value) {
	t := src.Type()
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			dst.Field(i).Set(src.Field(i))
		}
	}
}

var (
	buildIDOnce sync.Once
	buildID     string
)

// BuildID identifies this build of vigil for the configuration cache: the
// Go build ID of the running executable (the linker derives it from every
// input of the build, the -X flags included, so any change of the code
// changes it), or, for an executable without one, the SHA-256 of its
// content. It is "" when the executable cannot be read; LoadCached then
// keeps no cache.
func BuildID() string {
	buildIDOnce.Do(func() { buildID = readBuildID() })
	return buildID
}

func readBuildID() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if id := elfBuildID(exe); id != "" {
		return "go:" + id
	}
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// elfBuildID reads the Go build ID note of an ELF executable: "" when it
// is not ELF or has none.
func elfBuildID(exe string) string {
	f, err := elf.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := f.Section(".note.go.buildid")
	if s == nil {
		return ""
	}
	note, err := s.Data()
	if err != nil || len(note) < 16 {
		return ""
	}
	// namesz, descsz, type, then the name "Go\0\0" and the ID.
	nameSize, descSize := f.ByteOrder.Uint32(note), f.ByteOrder.Uint32(note[4:])
	if nameSize != 4 || string(note[12:16]) != "Go\x00\x00" || uint64(len(note)) < 16+uint64(descSize) {
		return ""
	}
	return string(note[16 : 16+descSize])
}

// cacheKey names the files' content and this build of vigil; "" when the
// build is unknown.
func cacheKey(files []fileSource) string {
	id := BuildID()
	if id == "" {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s:", len(id), id)
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
					// Relative to the file that names it, as the loader
					// takes it (paths.go).
					if dir = v.AsString(); !filepath.IsAbs(dir) {
						dir = filepath.Join(filepath.Dir(f.name), dir)
					}
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

// cacheHead is what the cache holds besides the Config: what is checked
// before the Config is decoded, and what Files and the diagnostics are
// rebuilt from. The Config follows it.
type cacheHead struct {
	// CAs are the CA bundles the health checks read, by content.
	CAs []cachedCA
	// Nav are each file's top-level blocks, for diagnostics' "in site
	// "www"" (Config.Files holds them with the file's text).
	Nav   map[string][]cachedNav
	Diags []cachedDiag
	// Index describes the files' blocks, for a reload (reparse.go); nil
	// when they cannot be reparsed in part.
	Index *blockIndex
}

type cachedCA struct {
	Path string
	Sum  [32]byte
}

type cachedNav struct {
	Start, End int
	Type       string
	Labels     []string
}

// cachedDiag is an hcl.Diagnostic without its expression and evaluation
// context, which the loader's warnings do not carry (writeCache refuses
// one that does).
type cachedDiag struct {
	Severity         hcl.DiagnosticSeverity
	Summary, Detail  string
	Subject, Context *hcl.Range
}

// caSums names every CA bundle the configuration's health checks hold, by
// the path the loader read it from, with its content's digest.
func caSums(cfg *Config) ([]cachedCA, error) {
	seen := map[string]bool{}
	var out []cachedCA
	hcs := map[*HealthCheck]bool{}
	for _, s := range cfg.Sites {
		hc := s.HealthCheck
		if hc == nil || hcs[hc] || hc.CAFile == "" {
			continue
		}
		hcs[hc] = true
		full := hc.CAFile
		if !filepath.IsAbs(full) {
			full = filepath.Join(filepath.Dir(s.DeclRange.Filename), full)
		}
		if seen[full] {
			continue
		}
		seen[full] = true
		b, err := os.ReadFile(full)
		if err != nil {
			return nil, err
		}
		out = append(out, cachedCA{Path: full, Sum: sha256.Sum256(b)})
	}
	return out, nil
}

func casUnchanged(cas []cachedCA) bool {
	for _, ca := range cas {
		b, err := os.ReadFile(ca.Path)
		if err != nil || sha256.Sum256(b) != ca.Sum {
			return false
		}
	}
	return true
}

// encodeCache is the cache file of cfg: the magic, the key, the SHA-256
// of the rest (a file damaged on disk is parsed anew, not believed), the
// head and the Config.
func encodeCache(key string, cfg *Config, diags hcl.Diagnostics, idx *blockIndex) ([]byte, error) {
	cas, err := caSums(cfg)
	if err != nil {
		return nil, err
	}
	head := cacheHead{CAs: cas, Nav: map[string][]cachedNav{}, Index: idx}
	for name, f := range cfg.Files {
		if n, ok := f.Nav.(*topNav); ok {
			for _, b := range n.blocks {
				head.Nav[name] = append(head.Nav[name], cachedNav{b.start, b.end, b.typ, b.labels})
			}
		}
	}
	for _, d := range diags {
		if d.Expression != nil || d.EvalContext != nil || d.Extra != nil {
			return nil, fmt.Errorf("diagnostic %q carries an expression: it cannot be cached", d.Summary)
		}
		head.Diags = append(head.Diags, cachedDiag{d.Severity, d.Summary, d.Detail, d.Subject, d.Context})
	}
	e := newCacheEncoder()
	// A site holds about four values met once (itself, its origins, its
	// sources list) and as many strings: sized for them, the tables are
	// not grown again and again (a third of the time at 100,000 sites).
	e.refs = make(map[refKey]uint64, 4*len(cfg.Sites))
	e.strs = make(map[string]uint64, 4*len(cfg.Sites))
	e.buf = append(e.buf, cacheMagic...)
	e.buf = binary.AppendUvarint(e.buf, uint64(len(key)))
	e.buf = append(e.buf, key...)
	sumAt := len(e.buf)
	e.buf = append(e.buf, make([]byte, sha256.Size)...)
	if err := e.value(reflect.ValueOf(&head).Elem()); err != nil {
		return nil, fmt.Errorf("cache head: %w", err)
	}
	if err := e.value(reflect.ValueOf(cfg).Elem()); err != nil {
		return nil, fmt.Errorf("Config%w", err)
	}
	sum := sha256.Sum256(e.buf[sumAt+sha256.Size:])
	copy(e.buf[sumAt:], sum[:])
	return e.buf, nil
}

func writeCache(dir, key string, cfg *Config, diags hcl.Diagnostics, idx *blockIndex) error {
	b, err := encodeCache(key, cfg, diags, idx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil { // as the store does: it is the agent's folder
		return err
	}
	tmp, err := os.CreateTemp(dir, CacheFileName+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, CacheFileName))
}

// errStale is a cache made from other files, by another build, or of
// CA bundles that changed since.
var errStale = errors.New("the cache was made from other files or by another build")

// readCache rebuilds the configuration from the cache at path when it was
// made from exactly these files by this build. A cache of other files is
// known by its first bytes: the rest is not read.
func readCache(path, key string, files []fileSource) (*Config, hcl.Diagnostics, *blockIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	head := make([]byte, len(cacheMagic)+binary.MaxVarintLen64+len(key))
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, nil, nil, err
	}
	if _, _, err := cacheKeyOf(head[:n], key); err != nil {
		return nil, nil, nil, err
	}
	rest, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, nil, err
	}
	return decodeCache(append(head[:n], rest...), key, files)
}

// cacheKeyOf checks the magic and the key at the start of a cache and
// returns what follows them.
func cacheKeyOf(b []byte, key string) ([]byte, int, error) {
	rest, ok := bytes.CutPrefix(b, []byte(cacheMagic))
	if !ok {
		return nil, 0, errors.New("not a configuration cache")
	}
	n, w := binary.Uvarint(rest)
	if w <= 0 || n != uint64(len(key)) || len(rest)-w < len(key) || string(rest[w:w+len(key)]) != key {
		return nil, 0, errStale
	}
	return rest[w+len(key):], w, nil
}

func decodeCache(b []byte, key string, files []fileSource) (cfg *Config, diags hcl.Diagnostics, idx *blockIndex, err error) {
	rest, _, err := cacheKeyOf(b, key)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(rest) < sha256.Size || sha256.Sum256(rest[sha256.Size:]) != [sha256.Size]byte(rest[:sha256.Size]) {
		return nil, nil, nil, errors.New("damaged cache: its checksum does not match")
	}
	d := &cacheDecoder{buf: rest[sha256.Size:]}
	defer func() {
		// The codec checks every length and index it reads; this is the
		// last guard of a start against a cache damaged in a way it missed.
		if r := recover(); r != nil {
			cfg, diags, idx, err = nil, nil, nil, fmt.Errorf("damaged cache: %v", r)
		}
	}()
	var head cacheHead
	if err := d.value(reflect.ValueOf(&head).Elem()); err != nil {
		return nil, nil, nil, err
	}
	if !casUnchanged(head.CAs) {
		return nil, nil, nil, errStale
	}
	d.files = make(map[string]*hcl.File, len(files))
	for _, fs := range files {
		nav := &topNav{}
		for _, b := range head.Nav[fs.name] {
			nav.blocks = append(nav.blocks, navBlock{b.Start, b.End, b.Type, b.Labels})
		}
		d.files[fs.name] = &hcl.File{Bytes: fs.src, Nav: nav}
	}
	cfg = &Config{}
	if err := d.value(reflect.ValueOf(cfg).Elem()); err != nil {
		return nil, nil, nil, err
	}
	if d.off != len(d.buf) {
		return nil, nil, nil, errors.New("damaged cache: bytes after the configuration")
	}
	cfg.Files = d.files
	for _, c := range head.Diags {
		diags = append(diags, &hcl.Diagnostic{Severity: c.Severity, Summary: c.Summary, Detail: c.Detail, Subject: c.Subject, Context: c.Context})
	}
	return cfg, diags, head.Index, nil
}

// reparseBody parses a source's config block again from its range in the
// file, so that its attributes keep their file:line. The range holds the
// braces, except for a block written on one line (config { a = 1 }),
// whose range is its one attribute.
func reparseBody(files map[string]*hcl.File, r hcl.Range) (hcl.Body, error) {
	f := files[r.Filename]
	if f == nil || r.End.Byte > len(f.Bytes) || r.Start.Byte < 0 || r.Start.Byte >= r.End.Byte {
		return nil, fmt.Errorf("a config block at %s outside the files", r)
	}
	src, inner := f.Bytes[r.Start.Byte:r.End.Byte], r.Start
	if len(src) >= 2 && src[0] == '{' && src[len(src)-1] == '}' {
		src, inner = src[1:len(src)-1], hcl.Pos{Line: r.Start.Line, Column: r.Start.Column + 1, Byte: r.Start.Byte + 1}
	}
	file, diags := hclsyntax.ParseConfig(src, r.Filename, inner)
	if diags.HasErrors() {
		return nil, fmt.Errorf("the config block at %s: %s", r, diags.Error())
	}
	body := file.Body.(*hclsyntax.Body)
	body.SrcRange = r
	return body, nil
}

// The codec writes a value of the configuration's types exactly as it is,
// by reflection, with no description of the types: the build that reads a
// cache is the build that wrote it (the key holds the build ID).
//
//   - Every exported field of a struct, in order; unexported fields hold
//     what the configuration derives (Config's site index) and are left
//     out, as are the fields in notCached.
//   - A pointer, map or non-empty slice is 0 when nil, 1 and its content
//     the first time it is met, and 2+i the i-th time after: values the
//     loader shares (a health check of many sites, a sources list) are
//     shared again after decoding, and a pointer to a zero value or an
//     empty slice or map stays what it was (gob loses both).
//   - A string is its index in a table of the strings met so far, or 0
//     and the string the first time: a file name in 300,000 ranges is
//     stored, and decoded, once.
//   - An interface is 0 when nil; the only other value it may hold is the
//     *hclsyntax.Body of a source's config block, stored as its range and
//     parsed again from the file on decoding.
//
// Any other kind of value (a func, a channel, an interface holding
// something else) is an error naming the field: the cache must not lose
// what Load returns.

// notCached are the fields the codec leaves out: Config.Files is the text
// the key already names, rebuilt from the files read.
var notCached = map[reflect.Type]map[string]bool{
	reflect.TypeFor[Config](): {"Files": true},
}

var (
	hclBodyType = reflect.TypeFor[hcl.Body]()
	rangeType   = reflect.TypeFor[hcl.Range]()
	fieldLists  sync.Map // reflect.Type -> []int
)

// cachedFields are the indexes of the fields of struct type t the codec
// writes: the exported ones, less notCached.
func cachedFields(t reflect.Type) []int {
	if l, ok := fieldLists.Load(t); ok {
		return l.([]int)
	}
	var l []int
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && !notCached[t][f.Name] {
			l = append(l, i)
		}
	}
	fieldLists.Store(t, l)
	return l
}

// hclRange writes a range without reflection: a configuration holds one
// per site, origin and health check. The file name goes through the
// string table.
func (e *cacheEncoder) hclRange(r *hcl.Range) {
	_ = e.value(reflect.ValueOf(&r.Filename).Elem())
	for _, p := range [2]hcl.Pos{r.Start, r.End} {
		e.buf = binary.AppendVarint(e.buf, int64(p.Line))
		e.buf = binary.AppendVarint(e.buf, int64(p.Column))
		e.buf = binary.AppendVarint(e.buf, int64(p.Byte))
	}
}

func (d *cacheDecoder) hclRange(r *hcl.Range) error {
	if err := d.value(reflect.ValueOf(&r.Filename).Elem()); err != nil {
		return err
	}
	for _, p := range [2]*hcl.Pos{&r.Start, &r.End} {
		for _, n := range [3]*int{&p.Line, &p.Column, &p.Byte} {
			x, w := binary.Varint(d.buf[d.off:])
			if w <= 0 || int64(int(x)) != x {
				return errDamaged
			}
			d.off += w
			*n = int(x)
		}
	}
	return nil
}

type refKey struct {
	t    reflect.Type
	p    uintptr
	n    int
	kind reflect.Kind
}

type cacheEncoder struct {
	buf  []byte
	strs map[string]uint64
	refs map[refKey]uint64
}

func newCacheEncoder() *cacheEncoder {
	return &cacheEncoder{buf: make([]byte, 0, 1<<20), strs: map[string]uint64{}, refs: map[refKey]uint64{}}
}

func (e *cacheEncoder) uint(n uint64) { e.buf = binary.AppendUvarint(e.buf, n) }

// ref writes the reference of a pointer, map or slice: false when it was
// met before (written as a back reference) and its content is not to
// follow.
func (e *cacheEncoder) ref(k refKey) bool {
	if i, ok := e.refs[k]; ok {
		e.uint(2 + i)
		return false
	}
	e.refs[k] = uint64(len(e.refs))
	e.uint(1)
	return true
}

func (e *cacheEncoder) value(v reflect.Value) error {
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			e.buf = append(e.buf, 1)
		} else {
			e.buf = append(e.buf, 0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.buf = binary.AppendVarint(e.buf, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.uint(v.Uint())
	case reflect.Float32, reflect.Float64:
		e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(v.Float()))
	case reflect.String:
		s := v.String()
		if i, ok := e.strs[s]; ok {
			e.uint(1 + i)
			return nil
		}
		e.strs[s] = uint64(len(e.strs))
		e.uint(0)
		e.uint(uint64(len(s)))
		e.buf = append(e.buf, s...)
	case reflect.Pointer:
		if v.IsNil() {
			e.uint(0)
			return nil
		}
		if e.ref(refKey{t: v.Type(), p: v.Pointer(), kind: reflect.Pointer}) {
			return e.value(v.Elem())
		}
	case reflect.Slice:
		if v.IsNil() {
			e.uint(0)
			return nil
		}
		if v.Len() == 0 {
			e.uint(1)
			e.uint(0)
			return nil
		}
		if !e.ref(refKey{t: v.Type(), p: v.Pointer(), n: v.Len(), kind: reflect.Slice}) {
			return nil
		}
		e.uint(uint64(v.Len()))
		if v.Type().Elem().Kind() == reflect.Uint8 {
			e.buf = append(e.buf, v.Bytes()...)
			return nil
		}
		for i := range v.Len() {
			if err := e.value(v.Index(i)); err != nil {
				return fmt.Errorf("[%d]%w", i, err)
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			if err := e.value(v.Index(i)); err != nil {
				return fmt.Errorf("[%d]%w", i, err)
			}
		}
	case reflect.Map:
		if v.IsNil() {
			e.uint(0)
			return nil
		}
		if !e.ref(refKey{t: v.Type(), p: v.Pointer(), kind: reflect.Map}) {
			return nil
		}
		e.uint(uint64(v.Len()))
		it := v.MapRange()
		for it.Next() {
			if err := e.value(it.Key()); err != nil {
				return fmt.Errorf("[key]%w", err)
			}
			if err := e.value(it.Value()); err != nil {
				return fmt.Errorf("[%v]%w", it.Key(), err)
			}
		}
	case reflect.Struct:
		if v.Type() == rangeType {
			e.hclRange(v.Addr().Interface().(*hcl.Range))
			return nil
		}
		for _, i := range cachedFields(v.Type()) {
			if err := e.value(v.Field(i)); err != nil {
				return fmt.Errorf(".%s%w", v.Type().Field(i).Name, err)
			}
		}
	case reflect.Interface:
		if v.IsNil() {
			e.uint(0)
			return nil
		}
		body, ok := v.Elem().Interface().(*hclsyntax.Body)
		if !ok || v.Type() != hclBodyType {
			return fmt.Errorf(": a %T in a %s cannot be cached", v.Elem().Interface(), v.Type())
		}
		e.uint(1)
		return e.value(reflect.ValueOf(&body.SrcRange).Elem())
	default:
		return fmt.Errorf(": a %s cannot be cached", v.Type())
	}
	return nil
}

type cacheDecoder struct {
	buf   []byte
	off   int
	strs  []string
	refs  []reflect.Value
	files map[string]*hcl.File // for the config blocks' bodies
}

var errDamaged = errors.New("damaged cache")

func (d *cacheDecoder) uint() (uint64, error) {
	n, w := binary.Uvarint(d.buf[d.off:])
	if w <= 0 {
		return 0, errDamaged
	}
	d.off += w
	return n, nil
}

// length reads a length, at most the bytes left: every element takes
// one byte at least.
func (d *cacheDecoder) length() (int, error) {
	n, err := d.uint()
	if err != nil || n > uint64(len(d.buf)-d.off) {
		return 0, errDamaged
	}
	return int(n), nil
}

// ref reads the reference of a pointer, map or slice: nil (0), a value
// met before (its value), or a new one to decode (fresh true).
func (d *cacheDecoder) ref(v reflect.Value) (fresh bool, err error) {
	tag, err := d.uint()
	switch {
	case err != nil:
		return false, err
	case tag == 0:
		return false, nil
	case tag == 1:
		return true, nil
	}
	i := tag - 2
	if i >= uint64(len(d.refs)) || d.refs[i].Type() != v.Type() {
		return false, errDamaged
	}
	v.Set(d.refs[i])
	return false, nil
}

func (d *cacheDecoder) value(v reflect.Value) error {
	switch v.Kind() {
	case reflect.Bool:
		if d.off >= len(d.buf) || d.buf[d.off] > 1 {
			return errDamaged
		}
		v.SetBool(d.buf[d.off] == 1)
		d.off++
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, w := binary.Varint(d.buf[d.off:])
		if w <= 0 || v.OverflowInt(n) {
			return errDamaged
		}
		d.off += w
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, err := d.uint()
		if err != nil || v.OverflowUint(n) {
			return errDamaged
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		if len(d.buf)-d.off < 8 {
			return errDamaged
		}
		v.SetFloat(math.Float64frombits(binary.LittleEndian.Uint64(d.buf[d.off:])))
		d.off += 8
	case reflect.String:
		i, err := d.uint()
		if err != nil {
			return err
		}
		if i > 0 {
			if i > uint64(len(d.strs)) {
				return errDamaged
			}
			v.SetString(d.strs[i-1])
			return nil
		}
		n, err := d.length()
		if err != nil {
			return err
		}
		s := string(d.buf[d.off : d.off+n])
		d.off += n
		d.strs = append(d.strs, s)
		v.SetString(s)
	case reflect.Pointer:
		fresh, err := d.ref(v)
		if !fresh || err != nil {
			return err
		}
		p := reflect.New(v.Type().Elem())
		d.refs = append(d.refs, p)
		v.Set(p)
		return d.value(p.Elem())
	case reflect.Slice:
		fresh, err := d.ref(v)
		if !fresh || err != nil {
			return err
		}
		n, err := d.length()
		if err != nil {
			return err
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		if n > 0 {
			d.refs = append(d.refs, s)
		}
		v.Set(s)
		if v.Type().Elem().Kind() == reflect.Uint8 {
			copy(s.Bytes(), d.buf[d.off:d.off+n])
			d.off += n
			return nil
		}
		for i := range n {
			if err := d.value(s.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			if err := d.value(v.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		fresh, err := d.ref(v)
		if !fresh || err != nil {
			return err
		}
		n, err := d.length()
		if err != nil {
			return err
		}
		m := reflect.MakeMapWithSize(v.Type(), n)
		d.refs = append(d.refs, m)
		v.Set(m)
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		for range n {
			k.SetZero()
			e.SetZero()
			if err := d.value(k); err != nil {
				return err
			}
			if err := d.value(e); err != nil {
				return err
			}
			m.SetMapIndex(k, e)
		}
	case reflect.Struct:
		if v.Type() == rangeType {
			return d.hclRange(v.Addr().Interface().(*hcl.Range))
		}
		for _, i := range cachedFields(v.Type()) {
			if err := d.value(v.Field(i)); err != nil {
				return err
			}
		}
	case reflect.Interface:
		tag, err := d.uint()
		if err != nil || tag > 1 || (tag == 1 && v.Type() != hclBodyType) {
			return errDamaged
		}
		if tag == 0 {
			return nil
		}
		var r hcl.Range
		if err := d.value(reflect.ValueOf(&r).Elem()); err != nil {
			return err
		}
		body, err := reparseBody(d.files, r)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(body))
	default:
		return fmt.Errorf("a %s cannot be cached", v.Type())
	}
	return nil
}
