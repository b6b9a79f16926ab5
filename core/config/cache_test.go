package config

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

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
		ForgetLastLoad() // as a new process
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
		ForgetLastLoad()
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

// TestLoadCachedAutoMTLSOffRestart: a source with auto_mtls = false keeps
// its plaintext transport on the second start, which reads the cache, and
// on a SIGHUP of the unchanged file. The cache of old mirrored the
// source's fields by hand and lost this one: the second start then spoke
// plaintext to nothing ("tls: first record does not look like a TLS
// handshake").
func TestLoadCachedAutoMTLSOffRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.hcl")
	src := fmt.Sprintf(`control { data_dir = %q }
source "py" {
  plugin = "vigil-source-py"
  auto_mtls = false
}
site "www" {
  hostname = "www.example.com"
  origin "a" { address = "https://203.0.113.10" }
  origin "b" { address = "https://203.0.113.11" }
}
`, filepath.Join(dir, "data"))
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	ForgetLastLoad()
	for _, step := range []struct {
		name   string
		forget bool
	}{{"first start", true}, {"second start, from the cache", true}, {"SIGHUP, nothing changed", false}} {
		t.Run(step.name, func(t *testing.T) {
			if step.forget {
				ForgetLastLoad()
			}
			cfg, diags := LoadCached(path)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			if s := cfg.Source("py"); s == nil || !s.PlaintextTransport {
				t.Fatalf("source py: PlaintextTransport lost: %+v", s)
			}
			if len(diags) != 1 || diags[0].Summary != "Plugin connection without TLS" {
				t.Fatalf("the warning is not repeated: %v", diags)
			}
		})
	}
}

// TestLoadCachedUnchangedIsShared: a second call with nothing changed
// (a SIGHUP) returns the sites of the Config in use, not a second copy;
// a changed file or CA bundle is loaded anew.
func TestLoadCachedUnchangedIsShared(t *testing.T) {
	dir := t.TempDir()
	ca, err := os.ReadFile("testdata/ca/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, dir, "")
	ForgetLastLoad()
	first, diags := LoadCached(path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	first.ForgetText() // as the agent does once it started
	second, diags := LoadCached(path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if second == first || second.Sites[0] != first.Sites[0] || second.Sources[0] != first.Sources[0] {
		t.Fatal("the unchanged configuration was loaded again, not shared")
	}
	if !Unchanged(first, second) {
		t.Fatal("Unchanged(first, second) = false for a SIGHUP of the unchanged file")
	}
	if again, _ := Load(path); Unchanged(first, again) {
		t.Fatal("Unchanged is true for a configuration loaded apart")
	}
	for name, f := range second.Files {
		if len(f.Bytes) == 0 {
			t.Fatalf("%s: the shared Config has no text for diagnostics", name)
		}
	}
	if second.Site("s00001") != second.Sites[1] {
		t.Fatal("the shared Config's site index is wrong")
	}
	// The caller keeps the copy and drops the first: a third SIGHUP still
	// finds the configuration in force.
	sites := first.Sites
	first = nil
	runtime.GC()
	runtime.GC()
	if again, _ := LoadCached(path); again.Sites[0] != second.Sites[0] || !Unchanged(second, again) {
		t.Fatal("after the first Config was dropped, an unchanged load did not share the second's")
	}
	first = &Config{Sites: sites}

	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), append(ca, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	third, diags := LoadCached(path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if third.Sites[0] == first.Sites[0] || Unchanged(second, third) {
		t.Fatal("a changed CA bundle did not load the configuration anew")
	}
	path = writeConfig(t, dir, `site "extra" {
  hostname = "extra.example.com"
  origin "a" { address = "http://127.0.0.1:1" }
  origin "b" { address = "http://127.0.0.1:2" }
}`)
	fourth, diags := LoadCached(path)
	if diags.HasErrors() || fourth.Site("extra") == nil || fourth.Sites[0] == third.Sites[0] || Unchanged(third, fourth) {
		t.Fatalf("a changed file was not loaded anew: %v", diags)
	}
	runtime.KeepAlive(first)
}

// TestCacheDamage: a cache cut short anywhere, or with any byte changed,
// or made by another build or from other files, is refused with an error
// and never believed or panicked on.
func TestCacheDamage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.hcl")
	src := []byte(`source "node" {
  plugin = "vigil-source-node"
  config { listen = "127.0.0.1:8471" }
}
site "www" {
  hostname = "www.example.com"
  health_check { headers = { "X-A" = "1" } }
  origin "a" { address = "https://203.0.113.10" }
  origin "b" {
    address = "https://203.0.113.11"
    level = 2
  }
}
`)
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	files := []fileSource{{name: path, src: src}}
	cfg, diags := parse(files)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	key := cacheKey(files)
	good, err := encodeCache(key, cfg, diags, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := decodeCache(good, key, files); err != nil {
		t.Fatalf("the cache as written does not decode: %v", err)
	}
	t.Run("another key", func(t *testing.T) {
		if _, _, _, err := decodeCache(good, cacheKey([]fileSource{{name: path, src: append(src, '\n')}}), files); !errors.Is(err, errStale) {
			t.Fatalf("err = %v, want errStale", err)
		}
	})
	t.Run("cut short", func(t *testing.T) {
		for n := range len(good) {
			if _, _, _, err := decodeCache(good[:n], key, files); err == nil {
				t.Fatalf("a cache cut at %d of %d bytes was believed", n, len(good))
			}
		}
	})
	t.Run("a byte changed", func(t *testing.T) {
		for i := range len(good) {
			bad := bytes.Clone(good)
			bad[i] ^= 0x55
			if _, _, _, err := decodeCache(bad, key, files); err == nil {
				t.Fatalf("a cache with byte %d of %d changed was believed", i, len(good))
			}
		}
	})
}

// TestCodecRefusesWhatItCannotKeep: a value the codec cannot write
// exactly is an error naming the field, so a field of such a kind added
// to a configuration type fails the tests rather than being lost.
func TestCodecRefusesWhatItCannotKeep(t *testing.T) {
	type withFunc struct {
		Name string
		Hook func()
	}
	type withIface struct {
		Body hcl.Body
		Any  any
	}
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"a func", &withFunc{Name: "x"}, ".Hook: a func() cannot be cached"},
		{"an interface holding another value", &withIface{Any: 3}, ".Any: a int in a interface {} cannot be cached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newCacheEncoder().value(reflect.ValueOf(tt.v).Elem())
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestCodecRoundTrip: the codec keeps what gob loses (a pointer to a zero,
// an empty slice or map beside a nil one), every kind the configuration
// uses, and values shared by pointer.
func TestCodecRoundTrip(t *testing.T) {
	type leaf struct {
		N    int
		U    uint8
		F    float64
		B    bool
		S    string
		Raw  []byte
		Arr  [3]byte
		Dur  time.Duration
		Zero *int
		Nil  *int
	}
	type tree struct {
		Leaves    []*leaf
		Empty     []string
		NilSlice  []string
		EmptyMap  map[string]string
		NilMap    map[string]string
		Lists     map[string][]string
		A, B      *leaf
		Same      []string
		SameAgain []string
		hidden    int
	}
	zero := 0
	shared := &leaf{N: -7, U: 200, F: 1.5, B: true, S: "shared", Raw: []byte{0, 1}, Arr: [3]byte{1, 2, 3}, Dur: time.Second, Zero: &zero}
	list := []string{"x", "shared"}
	in := tree{
		Leaves: []*leaf{shared, {S: "other", Raw: []byte{}}}, Empty: []string{}, EmptyMap: map[string]string{},
		Lists: map[string][]string{"k": {}, "l": nil}, A: shared, B: shared, Same: list, SameAgain: list, hidden: 9,
	}
	e := newCacheEncoder()
	if err := e.value(reflect.ValueOf(&in).Elem()); err != nil {
		t.Fatal(err)
	}
	var out tree
	d := &cacheDecoder{buf: e.buf}
	if err := d.value(reflect.ValueOf(&out).Elem()); err != nil {
		t.Fatal(err)
	}
	in.hidden = 0 // unexported: not kept
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n in %+v\nout %+v", in, out)
	}
	if out.A != out.B || out.A != out.Leaves[0] || &out.Same[0] != &out.SameAgain[0] {
		t.Fatal("values shared before are not shared after")
	}
	if out.Empty == nil || out.EmptyMap == nil || out.Lists["k"] == nil || out.Lists["l"] != nil || out.A.Zero == nil || out.Leaves[1].Raw == nil {
		t.Fatal("an empty value came back nil")
	}
}

// TestBuildID: the test binary has a build ID, the same at every call.
func TestBuildID(t *testing.T) {
	id := BuildID()
	if id == "" {
		t.Fatal("no build ID for the running executable")
	}
	if !strings.HasPrefix(id, "go:") && !strings.HasPrefix(id, "sha256:") {
		t.Fatalf("build ID %q", id)
	}
	if again := readBuildID(); again != id {
		t.Fatalf("read again: %q, first %q", again, id)
	}
	if runtime.GOOS == "linux" && !strings.HasPrefix(id, "go:") {
		t.Fatalf("on Linux the Go build ID note should be found; got %q", id)
	}
}

// BenchmarkLoadCached100k measures the agent's start on a 100,000-site
// configuration: a parse (cache miss), a start from the cache file, and a
// SIGHUP with nothing changed. Run with -benchtime=1x.
func BenchmarkLoadCached100k(b *testing.B) {
	dir := b.TempDir()
	var src strings.Builder
	fmt.Fprintf(&src, "control { data_dir = %q }\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n", filepath.Join(dir, "data"))
	for i := range 100000 {
		hc := `health_check { path = "/h" }`
		if i%10 == 0 {
			hc = fmt.Sprintf("health_check {\n    path = \"/h\"\n    headers = { \"X-Probe\" = \"%d\" }\n  }", i%7)
		}
		fmt.Fprintf(&src, "site \"s%06d\" {\n  hostname = \"s%06d.example.com\"\n  %s\n  origin \"a\" { address = \"https://127.0.0.1:1\" }\n  origin \"b\" {\n    address = \"https://127.0.0.1:2\"\n    level = 2\n  }\n}\n", i, i, hc)
	}
	path := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(path, []byte(src.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	BuildID()
	var parseT, fileT, hupT time.Duration
	var size int64
	for b.Loop() {
		_ = os.Remove(filepath.Join(dir, "data", CacheFileName))
		ForgetLastLoad()
		t0 := time.Now()
		_, diags := LoadCached(path)
		parseT += time.Since(t0)
		if diags.HasErrors() {
			b.Fatal(diags.Error())
		}
		st, err := os.Stat(filepath.Join(dir, "data", CacheFileName))
		if err != nil {
			b.Fatal(err)
		}
		size = st.Size()
		ForgetLastLoad()
		t0 = time.Now()
		cfg, _ := LoadCached(path)
		fileT += time.Since(t0)
		t0 = time.Now()
		again, _ := LoadCached(path)
		hupT += time.Since(t0)
		if again.Sites[0] != cfg.Sites[0] {
			b.Fatal("the SIGHUP did not share")
		}
	}
	n := float64(b.N)
	b.ReportMetric(parseT.Seconds()/n, "parse-s")
	b.ReportMetric(fileT.Seconds()/n, "from-file-s")
	b.ReportMetric(hupT.Seconds()/n, "unchanged-s")
	b.ReportMetric(float64(size)/(1<<20), "cache-MiB")
}

// BenchmarkBuildIDBySum is the fallback of BuildID for an executable
// without a Go build ID: the SHA-256 of the whole file, once per process.
func BenchmarkBuildIDBySum(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(exe)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		f, err := os.Open(exe)
		if err != nil {
			b.Fatal(err)
		}
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	b.ReportMetric(float64(st.Size())/(1<<20), "exe-MiB")
}

// BenchmarkReadBuildID is BuildID's work for an executable with a Go
// build ID note (every Go build on Linux): it reads the ELF note only.
func BenchmarkReadBuildID(b *testing.B) {
	for b.Loop() {
		if readBuildID() == "" {
			b.Fatal("no build ID")
		}
	}
}
