package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/internal/benchproc"
)

// reparseSite is the text of site i: kinds of health check that a reload
// must take again, or decode again, exactly as a fresh load would.
func reparseSite(i int, dir string) string {
	hc := ""
	switch i % 6 {
	case 1:
		hc = `health_check { path = "/h" }` // shared by every site of its kind
	case 2:
		hc = "health_check {\n    path = \"/c\"\n    confirm_interval = \"2s\"\n  }" // shared, with a position
	case 3:
		hc = `health_check { timeout = "2s" }` // its own, with a position
	case 4:
		hc = fmt.Sprintf("health_check {\n    ca_file = %q\n    insecure_skip_tls_verify = true\n  }", filepath.Join(dir, "ca.pem")) // a warning
	case 5:
		hc = `health_check {}` // the defaults, in a block of its own
	}
	return fmt.Sprintf("site \"s%03d\" {\n  hostname = \"s%03d.example.com\"\n  %s\n  origin \"a\" { address = \"https://127.0.0.1:1\" }\n  origin \"b\" {\n    address = \"https://127.0.0.1:2\"\n    level = 2\n  }\n}\n# after s%03d\n", i, i, hc, i)
}

func reparseConfig(dir string, control string, sites []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "control {\n  data_dir = %q\n  round_interval = \"10s\"\n%s}\n", filepath.Join(dir, "data"), control)
	b.WriteString(`source "direct" { plugin = "vigil-source-direct" }
publish "dns" {
  listen = "127.0.0.1:5353"
  zone = "example.com."
  ttl = 120
}
`)
	for _, s := range sites {
		b.WriteString(s)
	}
	return b.String()
}

// TestReloadReparseIsLoad: a load of changed files that takes the
// unchanged site blocks from the load before (a reload) gives what a fresh
// Load gives, field for field, position for position, in what is shared
// and in its diagnostics; and it does take sites again, the very values
// when their block did not move.
func TestReloadReparseIsLoad(t *testing.T) {
	dir := t.TempDir()
	ca, err := os.ReadFile("testdata/ca/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 60
	base := make([]string, n)
	for i := range base {
		base[i] = reparseSite(i, dir)
	}
	changed := func(i int) string {
		return strings.Replace(base[i], "https://127.0.0.1:1\"", "https://127.0.0.1:10001\"", 1)
	}
	with := func(edit func(s []string) []string) []string { return edit(slices.Clone(base)) }
	for _, c := range []struct {
		name    string
		control string
		sites   []string
		// same: the sites (by index in the new file) that must be the
		// very values of the load before; fresh: no site is taken again.
		same  []int
		fresh bool
		bad   bool
		// before runs after the first load (a CA bundle renewed).
		before func(t *testing.T)
		// cached: the configuration in force was read from config.cache
		// (a start from the cache), not parsed.
		cached bool
	}{
		{name: "sites added at the end", sites: append(slices.Clone(base), reparseSite(n, dir), reparseSite(n+1, dir)), same: []int{0, 7, n - 1}},
		{name: "many sites added, parsed in several pieces", sites: func() []string {
			s := slices.Clone(base)
			for i := n; i < n+1500; i++ { // over chunkSize (256 KiB)
				s = append(s, reparseSite(i, dir))
			}
			return s
		}(), same: []int{0, n - 1}},
		{name: "one site changed in place", sites: with(func(s []string) []string { s[10] = changed(10); return s }), same: []int{0, 9}},
		{name: "one site changed, after a start from the cache", cached: true, sites: with(func(s []string) []string { s[10] = changed(10); return s }), same: []int{0, 9}},
		{name: "a site removed in the middle", sites: with(func(s []string) []string { return slices.Delete(s, 20, 21) }), same: []int{0, 19}},
		{name: "a site added first", sites: with(func(s []string) []string { return slices.Insert(s, 0, reparseSite(n, dir)) })},
		{name: "two sites swapped", sites: with(func(s []string) []string { s[3], s[4] = s[4], s[3]; return s }), same: []int{0, 5}},
		{name: "one site given the shared health check of others", sites: with(func(s []string) []string {
			s[6] = strings.Replace(s[6], "\n  \n", "\n  health_check { path = \"/h\" }\n", 1)
			return s
		}), same: []int{0, 5}},
		{name: "a new site before others of its health check", sites: with(func(s []string) []string {
			return slices.Insert(s, 1, strings.Replace(reparseSite(n, dir), "\n  \n", "\n  health_check {\n    path = \"/c\"\n    confirm_interval = \"2s\"\n  }\n", 1))
		})},
		{name: "the control block changed", control: "  sites_per_round = 50\n", sites: with(func(s []string) []string { s[10] = changed(10); return s }), fresh: true},
		{name: "a duplicate site", sites: append(slices.Clone(base), base[5]), bad: true},
		{name: "a CA bundle renewed", sites: with(func(s []string) []string { s[10] = changed(10); return s }), fresh: true, before: func(t *testing.T) {
			renewed := append(slices.Clone(ca), '\n')
			if err := os.WriteFile(filepath.Join(dir, "ca.pem"), renewed, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "vigil.hcl")
			write := func(src string) {
				t.Helper()
				if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			config.ForgetLastLoad()
			write(reparseConfig(dir, "", base))
			prev, diags := config.LoadCached(path)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			if c.cached {
				config.ForgetLastLoad()
				if prev, diags = config.LoadCached(path); diags.HasErrors() {
					t.Fatal(diags.Error())
				}
			}
			prevWant, _ := config.Load(path)
			if c.before != nil {
				c.before(t)
			}
			write(reparseConfig(dir, c.control, c.sites))
			want, wantDiags := config.Load(path)
			got, gotDiags := config.LoadCached(path)
			if a, b := diagStrings(wantDiags), diagStrings(gotDiags); !slices.Equal(a, b) {
				t.Errorf("diagnostics differ:\nLoad:       %q\nLoadCached: %q", a, b)
			}
			if c.bad {
				if !gotDiags.HasErrors() {
					t.Fatal("no error")
				}
				return
			}
			if gotDiags.HasErrors() {
				t.Fatal(gotDiags.Error())
			}
			for _, d := range configDiff(want, got) {
				t.Error(d)
			}
			reused := config.LastReused()
			switch {
			case c.fresh && reused != 0:
				t.Errorf("%d sites taken again, want none", reused)
			case !c.fresh && reused < n/2:
				t.Errorf("%d sites taken again, want most of %d", reused, n)
			}
			for _, i := range c.same {
				if got.Sites[i] != prev.Site(got.Sites[i].Name) {
					t.Errorf("site %s: a new value, want the one in force (its block did not move)", got.Sites[i].Name)
				}
			}
			// Nothing of the configuration in force changed.
			prevWant.Files, prev.Files = nil, nil
			prevWant.Site("") // both with their site index built
			prev.Site("")
			for _, d := range configDiff(prevWant, prev) {
				t.Errorf("the configuration in force changed: %s", d)
			}
			runtime.KeepAlive(prev)
		})
	}
}

// BenchmarkLoadCachedReload100k is a reload's load of 100,000 sites beside
// a start's from the cache: reload-s with one site changed, 1% of them
// changed, and 10,000 sites grown to 50,000; from-file-s a start from the
// cache of the same file (a new process). The CPU figures count every
// thread of the process (the collector's too).
func BenchmarkLoadCachedReload100k(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "vigil.hcl")
	write := func(sites int, changed func(int) bool) {
		var src strings.Builder
		fmt.Fprintf(&src, "control { data_dir = %q }\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n", filepath.Join(dir, "data"))
		for i := range sites {
			port := 1
			if changed != nil && changed(i) {
				port = 10001
			}
			fmt.Fprintf(&src, "site \"s%06d\" {\n  hostname = \"s%06d.example.com\"\n  health_check { path = \"/h\" }\n  origin \"a\" { address = \"https://127.0.0.1:%d\" }\n  origin \"b\" {\n    address = \"https://127.0.0.1:2\"\n    level = 2\n  }\n}\n", i, i, port)
		}
		if err := os.WriteFile(path, []byte(src.String()), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	load := func() *config.Config {
		cfg, diags := config.LoadCached(path)
		if diags.HasErrors() {
			b.Fatal(diags.Error())
		}
		return cfg
	}
	for _, c := range []struct {
		name     string
		from, to int
		changed  func(int) bool
	}{
		{"one_changed", 100000, 100000, func(i int) bool { return i == 777 }},
		{"1pc_changed", 100000, 100000, func(i int) bool { return i%100 == 7 }},
		{"grow_10k_50k", 10000, 50000, nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			var reloadT, startT, reloadCPU, startCPU time.Duration
			for b.Loop() {
				b.StopTimer()
				config.ForgetLastLoad()
				write(c.from, nil)
				prev := load()
				write(c.to, c.changed)
				b.StartTimer()
				t0, c0 := time.Now(), benchproc.TreeCPU(os.Getpid())
				cfg := load()
				reloadT, reloadCPU = reloadT+time.Since(t0), reloadCPU+benchproc.TreeCPU(os.Getpid())-c0
				runtime.KeepAlive(cfg)
				b.StopTimer()
				if config.LastReused() == 0 {
					b.Fatal("nothing taken again")
				}
				runtime.KeepAlive(prev)
				config.ForgetLastLoad()
				runtime.GC()
				t0, c0 = time.Now(), benchproc.TreeCPU(os.Getpid())
				_ = load()
				startT, startCPU = startT+time.Since(t0), startCPU+benchproc.TreeCPU(os.Getpid())-c0
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(reloadT.Seconds()/n, "reload-s")
			b.ReportMetric(reloadCPU.Seconds()/n, "reload-cpu-s")
			b.ReportMetric(startT.Seconds()/n, "from-file-s")
			b.ReportMetric(startCPU.Seconds()/n, "from-file-cpu-s")
		})
	}
}

// TestReloadReparseFolder: a configuration of several files reloads as a
// fresh Load reads it: a site changed in one file takes the others of
// both files again; a site moved to the other file, and a new file, are
// parsed.
func TestReloadReparseFolder(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(conf, 0o750); err != nil {
		t.Fatal(err)
	}
	sites := func(from, to int, edit func(i int, s string) string) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			s := fmt.Sprintf("site \"s%03d\" {\n  hostname = \"s%03d.example.com\"\n  origin \"a\" { address = \"https://127.0.0.1:1\" }\n  origin \"b\" {\n    address = \"https://127.0.0.1:2\"\n    level = 2\n  }\n}\n", i, i)
			if edit != nil {
				s = edit(i, s)
			}
			b.WriteString(s)
		}
		return b.String()
	}
	head := fmt.Sprintf("control {\n  data_dir = %q\n}\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n", filepath.Join(dir, "data"))
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(conf, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config.ForgetLastLoad()
	write("a.hcl", head+sites(0, 10, nil))
	write("b.hcl", sites(10, 20, nil))
	prev, diags := config.LoadCached(conf)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, step := range []struct {
		name     string
		do       func()
		reused   int
		sameSite string
	}{
		{"a site changed in the second file", func() {
			write("b.hcl", sites(10, 20, func(i int, s string) string {
				if i == 15 {
					s = strings.Replace(s, "https://127.0.0.1:1\"", "https://127.0.0.1:10001\"", 1)
				}
				return s
			}))
		}, 19, "s003"},
		{"a site moved to the first file", func() {
			write("a.hcl", head+sites(0, 11, nil))
			write("b.hcl", sites(11, 20, nil))
		}, 18, "s004"}, // s010 moved and s015 changed back: parsed
		{"a new file", func() { write("c.hcl", sites(20, 22, nil)) }, 0, ""},
	} {
		t.Run(step.name, func(t *testing.T) {
			step.do()
			want, wantDiags := config.Load(conf)
			got, gotDiags := config.LoadCached(conf)
			if gotDiags.HasErrors() {
				t.Fatal(gotDiags.Error())
			}
			if a, b := diagStrings(wantDiags), diagStrings(gotDiags); !slices.Equal(a, b) {
				t.Errorf("diagnostics differ:\nLoad:       %q\nLoadCached: %q", a, b)
			}
			for _, d := range configDiff(want, got) {
				t.Error(d)
			}
			if n := config.LastReused(); n != step.reused {
				t.Errorf("%d sites taken again, want %d", n, step.reused)
			}
			if step.sameSite != "" && got.Site(step.sameSite) != prev.Site(step.sameSite) {
				t.Errorf("site %s: a new value, want the one in force", step.sameSite)
			}
			prev = got
		})
	}
}
