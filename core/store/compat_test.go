package store_test

import (
	"context"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/vigilcdn/vigil/core/store"
)

// TestOldOriginFieldsStillLoad: a site record that carries the keys Origin
// had until issue 21 loads, the rest of the origin intact: "verdict",
// which the engine wrote until 346efa2 (so older state files hold it), and
// "by" and "asked", never set by any commit (so omitted, but a record
// written by hand may hold them). Unknown keys are ignored by the JSON
// decoding that the bbolt store, its last-good copies and the etcd store
// share.
func TestOldOriginFieldsStillLoad(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(context.Background(), store.Batch{Meta: store.Meta{Round: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, store.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := `{"name":"www","level":1,"origins":{"a":{"state":"unhealthy","failures":3,"verdict":"down","by":"direct","asked":["node","direct"],"reason":"connect: connection refused"}}}`
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("sites")).Put([]byte("www"), []byte(old)) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	again, err := store.Open(dir, 0)
	if err != nil {
		t.Fatalf("opening a state file with the old fields: %v", err)
	}
	t.Cleanup(func() { again.Close() })
	st, err := again.Load(context.Background())
	if err != nil {
		t.Fatalf("loading a state file with the old fields: %v", err)
	}
	want := store.Origin{State: "unhealthy", Failures: 3, Reason: "connect: connection refused"}
	if got := st.Sites["www"].Origins["a"]; got != want {
		t.Errorf("origin loaded as %+v, want %+v", got, want)
	}
}
