package store_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/store"
)

// backups collects the reports of automatic copies.
type backups struct {
	mu   sync.Mutex
	errs []error
	ch   chan *store.BackupReport
}

func newBackups() *backups { return &backups{ch: make(chan *store.BackupReport, 100)} }

func (b *backups) on(rep *store.BackupReport, err error) {
	if err != nil {
		b.mu.Lock()
		b.errs = append(b.errs, err)
		b.mu.Unlock()
		return
	}
	b.ch <- rep
}

func (b *backups) wait(t *testing.T) *store.BackupReport {
	t.Helper()
	select {
	case rep := <-b.ch:
		return rep
	case <-time.After(time.Minute):
		b.mu.Lock()
		defer b.mu.Unlock()
		t.Fatalf("no automatic copy (errors: %v)", b.errs)
		return nil
	}
}

// sitesIn opens a copy of the state file at path in a data_dir of its own
// and counts its sites.
func sitesIn(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, store.FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := store.Check(dir)
	if err != nil {
		t.Fatalf("the copy %s fails the check: %v", path, err)
	}
	return rep.Sites
}

func TestBackupRotation(t *testing.T) {
	dir := t.TempDir()
	seen := newBackups()
	s, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: time.Hour, OnBackup: seen.on})
	if err != nil {
		t.Fatal(err)
	}
	first := seen.wait(t) // the copy right after opening
	good := filepath.Join(dir, store.GoodFileName)
	prev := filepath.Join(dir, store.PreviousGoodFileName)
	if first.Path != good || first.Previous != "" || sitesIn(t, good) != 0 {
		t.Fatalf("first copy: %+v", first)
	}
	fill(t, s, 50, 10, false)
	rep, err := s.Backup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Previous != prev || rep.Size == 0 || rep.ReadTx <= 0 || rep.Took < rep.ReadTx {
		t.Fatalf("second copy: %+v", rep)
	}
	if n := sitesIn(t, good); n != 50 {
		t.Fatalf("the new copy has %d sites", n)
	}
	if n := sitesIn(t, prev); n != 0 {
		t.Fatalf("the previous copy has %d sites", n)
	}
	fill(t, s, 60, 10, false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	last := seen.wait(t) // the copy at Close
	if last.Previous != prev || sitesIn(t, good) != 60 || sitesIn(t, prev) != 50 {
		t.Fatalf("copy at Close: %+v", last)
	}
	if _, err := s.Backup(context.Background()); err == nil {
		t.Fatal("a copy after Close succeeded")
	}
	if temps, _ := filepath.Glob(filepath.Join(dir, ".vigil.db.tmp-*")); len(temps) != 0 {
		t.Fatalf("temporary files left: %v", temps)
	}
}

// TestBackupPeriodicWhileCommitting runs copies often while rounds commit
// (and -race watches).
func TestBackupPeriodicWhileCommitting(t *testing.T) {
	dir := t.TempDir()
	seen := newBackups()
	s, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: 5 * time.Millisecond, OnBackup: seen.on})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		site := store.Site{Name: siteName(i), Level: 1}
		if err := s.Commit(ctx, store.Batch{Meta: store.Meta{Round: uint64(i + 1)}, Sites: []store.Site{site}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		seen.wait(t)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.errs) > 0 {
		t.Fatalf("automatic copies failed: %v", seen.errs)
	}
	if n := sitesIn(t, filepath.Join(dir, store.GoodFileName)); n != 30 {
		t.Fatalf("the copy at Close has %d sites, not 30", n)
	}
}

// TestBackupNeverInstallsABadCopy damages the file under a running store:
// the copy fails its check and the last-good copy stays.
func TestBackupNeverInstallsABadCopy(t *testing.T) {
	dir := t.TempDir()
	s, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fill(t, s, 300, 10, true)
	if _, err := s.Backup(context.Background()); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, store.GoodFileName)
	before, _ := os.ReadFile(good)

	path := filepath.Join(dir, store.FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range sitePages(b, 150) {
		f.WriteAt(make([]byte, page), int64(p*page))
	}
	f.Close()
	_, err = s.Backup(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the copy fails its check") {
		t.Fatalf("a copy of a damaged file: %v", err)
	}
	after, _ := os.ReadFile(good)
	if !bytes.Equal(before, after) {
		t.Fatal("the last-good copy was replaced by a damaged one")
	}
	if _, err := os.Stat(filepath.Join(dir, store.PreviousGoodFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the copies rotated: %v", err)
	}
	if temps, _ := filepath.Glob(filepath.Join(dir, ".vigil.db.tmp-*")); len(temps) != 0 {
		t.Fatalf("temporary files left: %v", temps)
	}
}

func TestBackupCancelled(t *testing.T) {
	dir := t.TempDir()
	s, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Backup(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled copy: %v", err)
	}
}

// TestBackupRestoreAfterDamage is the operator's way out: damage the file,
// open refuses it naming the copy, restore, reopen: the sites are back.
func TestBackupRestoreAfterDamage(t *testing.T) {
	dir := t.TempDir()
	s, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 500, 20, true)
	if _, err := s.Backup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, store.FileName)
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	_, err = store.Open(dir, 0)
	var d *store.DamagedError
	if !errors.As(err, &d) || d.Good == nil || !strings.Contains(err.Error(), store.GoodFileName) {
		t.Fatalf("open of a cut file: %v", err)
	}
	if _, err := store.Check(dir); !errors.As(err, &d) {
		t.Fatalf("check of a cut file: %v", err)
	}

	rep, err := store.Restore(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sites != 500 || rep.From.Path != filepath.Join(dir, store.GoodFileName) || !strings.Contains(rep.MovedAside, ".damaged-") || !strings.Contains(rep.Previous, "cut short") {
		t.Fatalf("restore: %+v", rep)
	}
	if st, err := os.Stat(rep.MovedAside); err != nil || st.Size() == 0 {
		t.Fatalf("the damaged file is not kept: %v", err)
	}
	again, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	state, err := again.Load(context.Background())
	if err != nil || len(state.Sites) != 500 || !state.Sites[siteName(0)].ManualHold || state.Meta.Round != 42 {
		t.Fatalf("after restore: %d sites, %v", len(state.Sites), err)
	}
}

func TestBackupRestoreChoices(t *testing.T) {
	dir := stateDir(t, nil)
	// No copy at all.
	if _, err := store.Restore(dir, ""); !errors.Is(err, store.ErrNoGoodCopy) || !strings.Contains(err.Error(), "-from FILE") {
		t.Fatalf("restore without a copy: %v", err)
	}
	// A damaged last-good copy and a sound previous one: the previous.
	files, _ := baseState(t)
	good := filepath.Join(dir, store.GoodFileName)
	os.WriteFile(good, files[store.FileName][:3*page], 0o600)
	os.WriteFile(filepath.Join(dir, store.PreviousGoodFileName), files[store.FileName], 0o600)
	rep, err := store.Restore(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.From.Path != filepath.Join(dir, store.PreviousGoodFileName) || len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0], "cut short") || rep.Previous != "" {
		t.Fatalf("restore: %+v", rep)
	}
	// -from a damaged file is refused and changes nothing.
	if _, err := store.Restore(dir, good); !errors.Is(err, store.ErrNoGoodCopy) {
		t.Fatalf("restore from a damaged file: %v", err)
	}
	// -from the state file itself.
	if _, err := store.Restore(dir, filepath.Join(dir, store.FileName)); err == nil || !strings.Contains(err.Error(), "the state file itself") {
		t.Fatalf("restore from itself: %v", err)
	}
	// -from a copy elsewhere, into a data_dir that lost its file.
	other := t.TempDir()
	rep, err = store.Restore(other, filepath.Join(dir, store.FileName))
	if err != nil || rep.MovedAside != "" || rep.Sites != testSites {
		t.Fatalf("restore into an empty data_dir: %+v %v", rep, err)
	}
	if _, err := os.Stat(filepath.Join(other, store.MarkerFileName)); err != nil {
		t.Fatal("no marker after a restore")
	}
}

func TestBackupCheckReport(t *testing.T) {
	dir := stateDir(t, nil)
	if _, err := store.Check(t.TempDir()); !errors.Is(err, store.ErrNoState) {
		t.Fatalf("check of an empty data_dir: %v", err)
	}
	rep, err := store.Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sites != testSites || rep.Events != 300 || rep.FirstEvent != 1 || rep.LastEvent != 300 || rep.Meta.Round != 42 ||
		rep.Meta.Publication != 7 || rep.Cursors != 1 || rep.Probes != testSites || rep.Good != nil || len(rep.Warnings) != 0 {
		t.Fatalf("check: %+v", rep)
	}
	// A record that does not decode is found by the full check.
	bad := stateDir(t, func(b []byte) []byte {
		for _, p := range sitePages(b, 10) {
			i := bytes.Index(b[p*page:], []byte(`{"name":"`+siteName(10)))
			b[p*page+i] = '#'
		}
		return b
	})
	if _, err := store.Check(bad); !errors.As(err, new(*store.DamagedError)) || !strings.Contains(err.Error(), "does not decode") {
		t.Fatalf("check of a bad record: %v", err)
	}
}
