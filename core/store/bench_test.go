package store_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/store"
)

var (
	bigOnce sync.Once
	bigDir  string
)

// bigState is a data_dir with 100,000 sites, a probe mark each and a full
// journal (about 60 MB), made once per test binary.
func bigState(b *testing.B) string {
	bigOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vigil-bench-")
		if err != nil {
			b.Fatal(err)
		}
		s, err := store.Open(dir, 0)
		if err != nil {
			b.Fatal(err)
		}
		fill(b, s, 100000, store.DefaultJournalSize, false)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		bigDir = dir
	})
	return bigDir
}

// BenchmarkOpenCheck100k is the agent's start: open with the structural
// check and bbolt's (no copies).
func BenchmarkOpenCheck100k(b *testing.B) {
	dir := bigState(b)
	b.ResetTimer()
	for b.Loop() {
		s, err := store.Open(dir, 0)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(s.Report().Check.Microseconds())/1000, "check-ms")
		s.Close()
	}
}

// BenchmarkOpenQuickCheck100k leaves bbolt's tx.Check out at open.
func BenchmarkOpenQuickCheck100k(b *testing.B) {
	dir := bigState(b)
	b.ResetTimer()
	for b.Loop() {
		s, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: -1, NoBoltCheck: true})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(s.Report().Check.Microseconds())/1000, "check-ms")
		s.Close()
	}
}

// BenchmarkLoad100k is what the engine does right after opening.
func BenchmarkLoad100k(b *testing.B) {
	dir := bigState(b)
	s, err := store.Open(dir, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Load(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStateCheck100k is `vigil state check`.
func BenchmarkStateCheck100k(b *testing.B) {
	dir := bigState(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := store.Check(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBackup100k writes and checks a last-good copy, and measures
// how long a commit waits meanwhile.
func BenchmarkBackup100k(b *testing.B) {
	dir := bigState(b)
	s, err := store.Open(dir, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ResetTimer()
	for b.Loop() {
		done := make(chan time.Duration)
		go func() {
			time.Sleep(5 * time.Millisecond)
			t0 := time.Now()
			if err := s.Commit(context.Background(), store.Batch{Meta: store.Meta{Round: 43, LastEvent: uint64(store.DefaultJournalSize), Publication: 7}}); err != nil {
				b.Error(err)
			}
			done <- time.Since(t0)
		}()
		rep, err := s.Backup(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		wait := <-done
		b.ReportMetric(float64(rep.ReadTx.Microseconds())/1000, "readtx-ms")
		b.ReportMetric(float64(wait.Microseconds())/1000, "commit-ms")
	}
}

// TestMain removes the benchmarks' big state.
func TestMain(m *testing.M) {
	code := m.Run()
	if bigDir != "" {
		os.RemoveAll(bigDir)
	}
	os.Exit(code)
}
