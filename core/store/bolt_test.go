package store_test

import (
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/core/store/storetest"
)

func TestBoltRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	storetest.RoundTrip(t, s, func() store.Store {
		if _, err := store.Open(dir, 5); err == nil || !strings.Contains(err.Error(), "another vigil agent") {
			t.Fatalf("a second open must be refused clearly, got %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		again, err := store.Open(dir, 5)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { again.Close() })
		return again
	})
}
