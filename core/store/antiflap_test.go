package store_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vigilcdn/vigil/core/store"
)

// TestAntiFlapFields: the anti-flap fields of issue 17 survive a commit
// and a reopen, and a record written before them loads with none (nil,
// zero), its other fields intact.
func TestAntiFlapFields(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	af := &store.OriginAntiFlap{Judged: "healthy", Held: true, HeldSince: at, QuarantineUntil: at.Add(time.Minute),
		LastChange: at.Add(30 * time.Second), Changes: nil}
	ramp := &store.SiteRamp{From: 3, Weight: 25, StepAt: at}
	site := store.Site{Name: "new", Level: 2, LevelSince: at, Ramp: ramp, Origins: map[string]store.Origin{
		"a": {State: "unhealthy", Successes: 2, AntiFlap: af}, "b": {State: "healthy"}}}
	if err := s.Commit(context.Background(), store.Batch{Meta: store.Meta{Round: 1}, Sites: []store.Site{site}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, store.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := `{"name":"old","level":1,"origins":{"a":{"state":"unhealthy","failures":3,"reason":"connect: connection refused"}}}`
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("sites")).Put([]byte("old"), []byte(old)) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	again, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	st, err := again.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := st.Sites["new"]
	if got.Ramp == nil || got.Ramp.From != ramp.From || got.Ramp.Weight != ramp.Weight || !got.Ramp.StepAt.Equal(ramp.StepAt) {
		t.Errorf("the ramp came back as %+v, want %+v", got.Ramp, ramp)
	}
	if !got.LevelSince.Equal(at) || got.Origins["a"].AntiFlap == nil || !reflect.DeepEqual(*got.Origins["a"].AntiFlap, *af) || got.Origins["b"].AntiFlap != nil {
		t.Errorf("the anti-flap fields came back as %+v, %+v; want %+v", got, got.Origins["a"].AntiFlap, af)
	}
	o := st.Sites["old"]
	if !o.LevelSince.IsZero() || o.Ramp != nil || o.Origins["a"] != (store.Origin{State: "unhealthy", Failures: 3, Reason: "connect: connection refused"}) {
		t.Errorf("an old record loaded as %+v", o)
	}
}
