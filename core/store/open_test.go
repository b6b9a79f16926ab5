package store_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vigilcdn/vigil/core/store"
)

const testSites = 2000

var (
	baseOnce  sync.Once
	baseFiles map[string][]byte // the data_dir of a sound state, by file name
	basePages uint64
	baseErr   error
)

// baseState returns the files of a data_dir holding testSites sites (enough
// for branch pages) and a journal, and the file's high-water mark in pages.
func baseState(t testing.TB) (map[string][]byte, uint64) {
	t.Helper()
	baseOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vigil-base-")
		if err != nil {
			baseErr = err
			return
		}
		defer os.RemoveAll(dir)
		s, err := store.Open(dir, 0)
		if err != nil {
			baseErr = err
			return
		}
		fill(t, s, testSites, 300, true)
		if err := s.Close(); err != nil {
			baseErr = err
			return
		}
		again, err := store.Open(dir, 0)
		if err != nil {
			baseErr = err
			return
		}
		basePages = again.Report().Pages
		again.Close()
		baseFiles = map[string][]byte{}
		for _, name := range []string{store.FileName, store.MarkerFileName} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				baseErr = err
				return
			}
			baseFiles[name] = b
		}
	})
	if baseErr != nil {
		t.Fatal(baseErr)
	}
	return baseFiles, basePages
}

// stateDir writes the base state into a new data_dir, vigil.db changed by
// damage (nil: unchanged).
func stateDir(t *testing.T, damage func(db []byte) []byte) string {
	t.Helper()
	files, _ := baseState(t)
	dir := t.TempDir()
	for name, b := range files {
		b = bytes.Clone(b)
		if name == store.FileName && damage != nil {
			b = damage(b)
			if b == nil {
				continue
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const page = 4096

func truncate(n func(size int) int) func([]byte) []byte {
	return func(b []byte) []byte { return b[:n(len(b))] }
}

func zeroPage(id int) func([]byte) []byte {
	return func(b []byte) []byte {
		clear(b[id*page : (id+1)*page])
		return b
	}
}

// inUsePage finds a leaf page holding the record of site i: the newest
// copy of it, the one the tree uses (older copies sit on free pages).
func sitePages(b []byte, i int) []int {
	needle := []byte(`{"name":"` + siteName(i) + `"`)
	var pages []int
	for off := 0; ; {
		j := bytes.Index(b[off:], needle)
		if j < 0 {
			return pages
		}
		pages = append(pages, (off+j)/page)
		off += j + len(needle)
	}
}

type outcome int

const (
	clean   outcome = iota // opens with every site
	damaged                // *DamagedError
	missing                // *MissingError
	access                 // an fs.ErrPermission error
	badLoad                // opens, and Load gives a *DamagedError
)

func TestOpenDamagedFiles(t *testing.T) {
	_, pages := baseState(t)
	hwm := int(pages) * page
	tests := []struct {
		name   string
		damage func([]byte) []byte
		want   outcome
		msg    string // in the error
	}{
		{"sound", nil, clean, ""},
		{"truncated to half", truncate(func(n int) int { return hwm / 2 }), damaged, "it was cut short"},
		{"one page short of the high-water mark", truncate(func(n int) int { return hwm - page }), damaged, "it was cut short"},
		{"one byte short of the high-water mark", truncate(func(n int) int { return hwm - 1 }), damaged, "it was cut short"},
		{"meta pages only", truncate(func(n int) int { return 2 * page }), damaged, "it was cut short"},
		{"one page", truncate(func(n int) int { return page }), damaged, "cut short"},
		{"one byte", truncate(func(n int) int { return 1 }), damaged, "too short to hold a header page"},
		{"zero bytes", truncate(func(n int) int { return 0 }), missing, "is empty (0 bytes)"},
		{"garbage appended", func(b []byte) []byte { return append(b, bytes.Repeat([]byte{0xAB}, 3*page)...) }, clean, ""},
		{"meta page 0 zeroed", zeroPage(0), clean, ""},
		{"meta page 1 zeroed", zeroPage(1), clean, ""},
		{"both meta pages zeroed", func(b []byte) []byte { return zeroPage(1)(zeroPage(0)(b)) }, damaged, "neither header page is valid"},
		{"meta checksum flipped on both", func(b []byte) []byte { b[page-1+60] ^= 1; b[60] ^= 1; b[page+60] ^= 1; return b }, damaged, "header"},
		{"a site's leaf page zeroed", func(b []byte) []byte {
			for _, p := range sitePages(b, 700) {
				zeroPage(p)(b)
			}
			return b
		}, damaged, ""},
		{"element header flipped in a site's page", func(b []byte) []byte {
			for _, p := range sitePages(b, 900) {
				b[p*page+16+4+3] ^= 0x40 // the high byte of element 0's pos
			}
			return b
		}, damaged, "points outside its page"},
		{"a byte of a site record flipped", func(b []byte) []byte {
			for _, p := range sitePages(b, 1200) {
				i := bytes.Index(b[p*page:], []byte(`{"name":"`+siteName(1200)))
				b[p*page+i] = '#'
			}
			return b
		}, badLoad, `the site record "site-001200.example.com" does not decode`},
		{"a top-level bucket turned into a plain key", func(b []byte) []byte {
			root := int(binary.NativeEndian.Uint64(b[newestMeta(b)+16+16:]))
			b[root*page+16] &^= 1 // element 0's bucket flag
			return b
		}, damaged, "only buckets belong"},
		{"random garbage", func(b []byte) []byte {
			r := rand.New(rand.NewPCG(1, 2))
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			return b
		}, damaged, "neither header page is valid"},
		{"missing, the marker present", func([]byte) []byte { return nil }, missing, "is missing although"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, fresh := range []bool{false, true} {
				dir := stateDir(t, tt.damage)
				s, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: -1, Fresh: fresh})
				got := classify(t, s, err)
				want := tt.want
				if fresh && (want == damaged || want == missing) {
					want = clean
					if got == clean && !s.Report().Fresh {
						t.Fatalf("fresh: no Fresh in the report: %+v", s.Report())
					}
				}
				if got != want {
					t.Fatalf("fresh=%v: outcome %d, want %d (error: %v)", fresh, got, want, err)
				}
				if err != nil && !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("error %q does not say %q", err, tt.msg)
				}
				if err != nil && (want == damaged || want == missing) {
					for _, say := range []string{filepath.Join(dir, store.FileName), "vigil state restore -data-dir", "-fresh-state"} {
						if !strings.Contains(err.Error(), say) {
							t.Fatalf("error %q does not say %q", err, say)
						}
					}
				}
				if fresh && s != nil && s.Report().Fresh {
					checkFresh(t, dir, s, tt.want == damaged || tt.name == "zero bytes")
				}
				if s != nil {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// classify opens' outcome; a clean open must hold every site.
func classify(t *testing.T, s *store.Bolt, err error) outcome {
	t.Helper()
	var d *store.DamagedError
	var m *store.MissingError
	switch {
	case err == nil:
	case errors.As(err, &d):
		if !errors.Is(err, store.ErrDamaged) || d.Path == "" || d.Problem == "" {
			t.Fatalf("a DamagedError without its parts: %#v", d)
		}
		return damaged
	case errors.As(err, &m):
		if !errors.Is(err, store.ErrStateMissing) {
			t.Fatalf("a MissingError that is not ErrStateMissing: %v", err)
		}
		return missing
	case errors.Is(err, fs.ErrPermission):
		return access
	default:
		t.Fatalf("an untyped error: %v", err)
	}
	st, err := s.Load(context.Background())
	if err != nil {
		if errors.As(err, &d) {
			return badLoad
		}
		t.Fatalf("Load: an untyped error: %v", err)
	}
	if !s.Report().Fresh && len(st.Sites) != testSites {
		t.Fatalf("opened with %d sites, not %d: state silently lost", len(st.Sites), testSites)
	}
	return clean
}

// checkFresh checks a fresh start: empty, the old file kept.
func checkFresh(t *testing.T, dir string, s *store.Bolt, fileExisted bool) {
	t.Helper()
	st, err := s.Load(context.Background())
	if err != nil || len(st.Sites) != 0 {
		t.Fatalf("fresh state: %d sites, %v", len(st.Sites), err)
	}
	rep := s.Report()
	if rep.Problem == "" {
		t.Fatalf("fresh start without the problem: %+v", rep)
	}
	if fileExisted {
		if len(rep.Moved) == 0 || rep.Moved[0].From != filepath.Join(dir, store.FileName) || !strings.Contains(rep.Moved[0].To, ".damaged-") {
			t.Fatalf("the old file was not moved aside: %+v", rep.Moved)
		}
		if _, err := os.Lstat(rep.Moved[0].To); err != nil {
			t.Fatalf("the moved file is gone: %v", err)
		}
	}
}

func TestOpenDirectoryNamedVigilDB(t *testing.T) {
	dir := stateDir(t, func([]byte) []byte { return nil })
	if err := os.Mkdir(filepath.Join(dir, store.FileName), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: -1})
	var d *store.DamagedError
	if !errors.As(err, &d) || !strings.Contains(err.Error(), "it is a directory") {
		t.Fatalf("a directory: %v", err)
	}
	s, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: -1, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err := os.Stat(s.Report().Moved[0].To); err != nil || !st.IsDir() {
		t.Fatalf("the directory was not kept: %v", err)
	}
}

func TestOpenUnreadable(t *testing.T) {
	dir := stateDir(t, nil)
	path := filepath.Join(dir, store.FileName)
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(path, 0o600)
	if f, err := os.Open(path); err == nil {
		f.Close()
		t.Skip("running as root: permissions cannot make the file unreadable")
	}
	for _, fresh := range []bool{false, true} {
		_, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: -1, Fresh: fresh})
		if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "chown or chmod") {
			t.Fatalf("fresh=%v: an unreadable file: %v", fresh, err)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal("an unreadable file was moved")
	}
}

func TestOpenFirstStartAndMissing(t *testing.T) {
	dir := t.TempDir()
	s, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Report().Created {
		t.Fatalf("a first start is not reported: %+v", s.Report())
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, store.MarkerFileName)); err != nil {
		t.Fatalf("no marker: %v", err)
	}

	// Only a last-good copy, no marker: state existed.
	os.Rename(filepath.Join(dir, store.FileName), filepath.Join(dir, store.GoodFileName))
	os.Remove(filepath.Join(dir, store.MarkerFileName))
	_, err = store.OpenWith(dir, store.OpenOptions{BackupInterval: -1})
	var m *store.MissingError
	if !errors.As(err, &m) || m.Good == nil || !strings.Contains(err.Error(), "a last-good copy") || !strings.Contains(err.Error(), "vigil state restore -data-dir") {
		t.Fatalf("missing with a last-good copy: %v", err)
	}
	s, err = store.OpenWith(dir, store.OpenOptions{BackupInterval: -1, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep := s.Report()
	if !rep.Fresh || len(rep.Moved) != 1 || !strings.Contains(rep.Moved[0].To, store.GoodFileName+".kept-") {
		t.Fatalf("fresh start: the last-good copy is not kept aside: %+v", rep)
	}
}

func TestOpenInUse(t *testing.T) {
	dir := stateDir(t, nil)
	s, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = store.OpenWith(dir, store.OpenOptions{BackupInterval: -1, LockTimeout: 50_000_000, Fresh: true})
	if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), "in use by a running agent") {
		t.Fatalf("a second open: %v", err)
	}
	if _, err := store.Check(dir); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("check while in use: %v", err)
	}
	if _, err := store.Restore(dir, ""); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("restore while in use: %v", err)
	}
}

func TestOpenReportsTheCheck(t *testing.T) {
	dir := stateDir(t, nil)
	s, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep := s.Report()
	if rep.Sites != testSites || rep.Events != 300 || rep.Pages == 0 || rep.Check <= 0 || len(rep.Warnings) != 0 {
		t.Fatalf("report: %+v", rep)
	}
}

func TestOpenOneBadMetaWarns(t *testing.T) {
	dir := stateDir(t, zeroPage(0))
	s, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if w := s.Report().Warnings; len(w) != 1 || !strings.Contains(w[0], "header page 0") {
		t.Fatalf("warnings: %q", w)
	}
}

func siteName(i int) string { return siteRecord(i, zeroTime, true).Name }

// newestMeta is the offset of the header page bbolt reads (the higher
// transaction id).
func newestMeta(b []byte) int {
	tx := func(off int) uint64 { return binary.NativeEndian.Uint64(b[off+16+48:]) }
	if tx(page) > tx(0) {
		return page
	}
	return 0
}
