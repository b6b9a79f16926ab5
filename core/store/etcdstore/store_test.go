package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/store"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
	"github.com/vigilcdn/vigil/core/store/storetest"
)

// keyFence guards writes with the create revision of one key, as the
// leader key of an election term does.
type keyFence struct {
	key string
	rev int64
}

func (f keyFence) cmps() []clientv3.Cmp {
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(f.key), "=", f.rev)}
}
func (f keyFence) Writer() ([]clientv3.Cmp, bool)     { return f.cmps(), true }
func (f keyFence) Site(string) ([]clientv3.Cmp, bool) { return nil, true }
func (f keyFence) Notifier() ([]clientv3.Cmp, bool)   { return f.cmps(), true }

// TestRoundTrip runs the store contract with etcd's default limit, where
// every commit of the contract is one transaction, and with a limit of 5
// operations, where every one is split (doc.go, "Split commits").
func TestRoundTrip(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	for _, tt := range []struct {
		name   string
		maxOps int
	}{{"one transaction", 0}, {"split", 5}} {
		t.Run(tt.name, func(t *testing.T) {
			opts := etcdstore.Options{Prefix: "/t-" + strings.ReplaceAll(tt.name, " ", "-"), JournalSize: 5, MaxTxnOps: tt.maxOps}
			storetest.RoundTrip(t, newStore(cli, opts), func() store.Store { return newStore(cli, opts) })
		})
	}
}

// TestFence: a writer whose term ended (its leader key gone, or replaced
// by another term's) writes nothing, and says so with ErrFenced.
func TestFence(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ctx := context.Background()
	lease, err := cli.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	put, err := cli.Put(ctx, "/f/leader/1", "old", clientv3.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	old := newStore(cli, etcdstore.Options{Prefix: "/f", Fence: keyFence{"/f/leader/1", put.Header.Revision}})
	batch := func(level int) store.Batch {
		return store.Batch{Meta: store.Meta{Round: uint64(level)}, Sites: []store.Site{{Name: "www", Level: level}},
			Events: []store.Event{{Site: "www", Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 1, ToLevel: level}}}}
	}
	if err := old.Commit(ctx, batch(2)); err != nil {
		t.Fatalf("the leader of the term must write: %v", err)
	}
	// The lease is revoked (as when it expires): the term is over.
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	put2, err := cli.Put(ctx, "/f/leader/2", "new")
	if err != nil {
		t.Fatal(err)
	}
	cur := newStore(cli, etcdstore.Options{Prefix: "/f", Fence: keyFence{"/f/leader/2", put2.Header.Revision}})
	for _, tt := range []struct {
		name  string
		write func() error
	}{
		{"commit", func() error { return old.Commit(ctx, batch(3)) }},
		{"commit of a large batch", func() error {
			b := batch(3)
			for i := range 300 {
				b.Sites = append(b.Sites, store.Site{Name: fmt.Sprintf("s%03d", i)})
			}
			return old.Commit(ctx, b)
		}},
		{"cursor", func() error { return old.SetCursor(ctx, "hook", 99) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.write(); !errors.Is(err, etcdstore.ErrFenced) {
				t.Fatalf("a deposed writer's %s returned %v, want ErrFenced", tt.name, err)
			}
		})
	}
	st, err := cur.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Sites["www"].Level != 2 || st.Meta.LastEvent != 1 || len(st.Sites) != 1 || st.Cursors["hook"] != 0 {
		t.Fatalf("a fenced write changed the state: %+v", st)
	}
	if err := cur.Commit(ctx, batch(4)); err != nil {
		t.Fatalf("the new term's leader must write: %v", err)
	}
}

// TestConcurrentWriters: writers of disjoint sites (sharded mode) share
// one journal without reusing or skipping a sequence number.
func TestConcurrentWriters(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const writers, commits = 3, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		// The last writer's commits are split (more than 5 operations).
		s := newStore(srv.Client(t), etcdstore.Options{Prefix: "/c", MaxTxnOps: map[bool]int{true: 5}[w == writers-1]})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range commits {
				site := fmt.Sprintf("w%d", w)
				b := store.Batch{Meta: store.Meta{Round: uint64(i + 1)}, Sites: []store.Site{{Name: site, Level: i}},
					Events: []store.Event{{Site: site, Event: decide.Event{Kind: decide.KindOriginState}}, {Site: site, Event: decide.Event{Kind: decide.KindOriginState}}}}
				if err := s.Commit(ctx, b); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s := newStore(srv.Client(t), etcdstore.Options{Prefix: "/c"})
	evs, err := s.Events(ctx, 0, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != writers*commits*2 {
		t.Fatalf("%d events, want %d", len(evs), writers*commits*2)
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: the journal has a gap or a reused number", i, e.Seq)
		}
	}
}
