package store_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/store"
)

// smallState is a sound vigil.db with n sites and its marker: with 40,
// some buckets inline and some not; with 150 heavy ones, branch pages.
func smallState(f *testing.F, n int, heavy bool) (db, marker []byte) {
	dir := f.TempDir()
	s, err := store.Open(dir, 0)
	if err != nil {
		f.Fatal(err)
	}
	fill(f, s, n, 5, heavy)
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	db, err = os.ReadFile(filepath.Join(dir, store.FileName))
	if err != nil {
		f.Fatal(err)
	}
	marker, err = os.ReadFile(filepath.Join(dir, store.MarkerFileName))
	if err != nil {
		f.Fatal(err)
	}
	return db, marker
}

// FuzzOpenDamaged opens damaged state files: whatever the bytes, opening
// never panics or faults, and gives a typed error or a store that loads,
// lists events, commits and closes (its errors typed too).
//
//	go test ./core/store -run '^$' -fuzz FuzzOpenDamaged -fuzztime 60s -fuzzminimizetime 10x
//
// (Minimizing a large input takes minutes by default: keep it short.)
func FuzzOpenDamaged(f *testing.F) {
	big, _ := smallState(f, 150, true)
	f.Add(big)
	for _, p := range []int{3, 10, 20} {
		if (p+1)*page <= len(big) {
			f.Add(zeroPage(p)(bytes.Clone(big)))
		}
	}
	db, marker := smallState(f, 40, false)
	f.Add(db)
	for _, n := range []int{len(db) / 2, 3 * page, 2 * page, page, 100, 1, 0} {
		f.Add(bytes.Clone(db[:min(n, len(db))]))
	}
	for _, p := range []int{0, 1, 2, 3, 4, 5} {
		if (p+1)*page <= len(db) {
			f.Add(zeroPage(p)(bytes.Clone(db)))
		}
	}
	for _, off := range []int{2*page + 8, 3*page + 10, 3*page + 20, 4*page + 16, 5*page + 100} {
		if off < len(db) {
			b := bytes.Clone(db)
			b[off] ^= 0xFF
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, store.FileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, store.MarkerFileName), marker, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: -1, LockTimeout: time.Second})
		if err != nil {
			var d *store.DamagedError
			var m *store.MissingError
			if !errors.As(err, &d) && !errors.As(err, &m) {
				t.Fatalf("an untyped error: %v", err)
			}
			if m != nil && len(data) != 0 {
				t.Fatalf("a %d-byte file reported missing: %v", len(data), err)
			}
			return
		}
		defer s.Close()
		typed := func(what string, err error) {
			var d *store.DamagedError
			if err != nil && !errors.As(err, &d) {
				t.Fatalf("%s: an untyped error: %v", what, err)
			}
		}
		ctx := context.Background()
		st, err := s.Load(ctx)
		typed("Load", err)
		_, err = s.Events(ctx, 0, "", 1000)
		typed("Events", err)
		if st != nil {
			err = s.Commit(ctx, store.Batch{Meta: st.Meta, Sites: []store.Site{{Name: "fuzz", Level: 1}}, Deleted: []string{"site-000001.example.com"}})
			if err != nil && !errors.As(err, new(*store.DamagedError)) {
				// A sound-looking file whose bbolt tree refuses a write:
				// not a crash, and typed enough for the agent to stop.
				t.Logf("Commit: %v", err)
			}
		}
	})
}
