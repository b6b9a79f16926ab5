package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/store"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// compactRound is round r of 20 sites: site i moves to level r when i%3
// is r%3, with one event each; split when the store's limit is small.
func compactRound(r int) store.Batch {
	b := store.Batch{Meta: store.Meta{Round: uint64(r), Publication: uint64(r)}}
	for i := range 20 {
		if r > 1 && i%3 != r%3 {
			continue
		}
		name := fmt.Sprintf("s%02d", i)
		b.Sites = append(b.Sites, store.Site{Name: name, Level: r})
		b.Events = append(b.Events, store.Event{Site: name, Round: uint64(r),
			Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: r - 1, ToLevel: r, Reason: decide.ReasonFailover}})
	}
	return b
}

// TestCompaction runs two instances' compactors against a real etcd at
// its defaults, between rounds of commits (some split): one interval's
// turn goes to one instance only, etcd forgets the revisions before the
// compaction (a read there is ErrCompacted), and the state, the journal
// and a follower that was behind the compaction all read whole.
func TestCompaction(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		maxOps int
	}{{"one transaction", 0}, {"split", 8}} {
		t.Run(tt.name, func(t *testing.T) {
			prefix := fmt.Sprintf("/compact-%d", tt.maxOps)
			s := newStore(cli, etcdstore.Options{Prefix: prefix, MaxTxnOps: tt.maxOps})
			follower := newStore(cli, etcdstore.Options{Prefix: prefix, MaxTxnOps: tt.maxOps})
			a, b := s.Compactor(), follower.Compactor()
			round := 0
			commit := func(n int) {
				t.Helper()
				for range n {
					round++
					if err := s.Commit(ctx, compactRound(round)); err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
				}
			}
			step := func(c *etcdstore.Compactor) int64 {
				t.Helper()
				rev, err := c.Step(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return rev
			}

			commit(1)
			followed, seen, err := follower.LoadSince(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			// Interval 1: both learn where they stand; nothing compacts
			// (no revision is one interval old yet).
			if ra, rb := step(a), step(b); ra != 0 || rb != 0 {
				t.Fatalf("first interval compacted to %d and %d; want no compaction", ra, rb)
			}
			commit(10)
			// Interval 2: a's turn (b lost the first); b must not compact too.
			target := step(a)
			if target < seen {
				t.Fatalf("a compacted to revision %d; want at least the revision of its first step (>= %d)", target, seen)
			}
			if rb := step(b); rb != 0 {
				t.Fatalf("b compacted to %d in the interval a compacted in", rb)
			}
			if got := a.Compactions() + b.Compactions(); got != 1 {
				t.Fatalf("%d compactions in one interval; want 1", got)
			}
			commit(10)
			// Interval 3: b, which learned a's turn, takes this one.
			target2 := step(b)
			if target2 <= target || step(a) != 0 {
				t.Fatalf("third interval: b compacted to %d after %d, a too: want b alone, past the previous", target2, target)
			}
			if a.Compacted() != target || b.Compacted() != target2 {
				t.Fatalf("Compacted: a %d, b %d; want %d, %d", a.Compacted(), b.Compacted(), target, target2)
			}
			if target2 <= seen {
				t.Fatalf("compacted to %d, not past the follower's revision %d: the test proves nothing", target2, seen)
			}

			// etcd forgot the old revisions.
			if _, err := cli.Get(ctx, s.MetaKey(), clientv3.WithRev(seen)); !errors.Is(err, rpctypes.ErrCompacted) {
				t.Fatalf("a read at revision %d after a compaction to %d: %v; want ErrCompacted", seen, target2, err)
			}
			// A watch from there says so (every watch of core/ha then reads again).
			wctx, cancel := context.WithCancel(ctx)
			wr := <-cli.Watch(wctx, s.MetaKey(), clientv3.WithRev(seen))
			cancel()
			if wr.CompactRevision < target2 {
				t.Fatalf("a watch from revision %d: compact revision %d; want %d", seen, wr.CompactRevision, target2)
			}

			// The follower behind the compaction catches up with what
			// changed since its revision, and loses nothing.
			changed, _, err := follower.LoadSince(ctx, seen)
			if err != nil {
				t.Fatalf("follower behind the compaction: %v", err)
			}
			maps.Copy(followed.Sites, changed.Sites)
			full, err := s.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(full.Sites) != 20 || len(followed.Sites) != 20 || changed.Meta.Round != uint64(round) {
				t.Fatalf("full read %d sites, follower %d at round %d; want 20 at round %d", len(full.Sites), len(followed.Sites), changed.Meta.Round, round)
			}
			for name, want := range full.Sites {
				if got := followed.Sites[name]; got.Level != want.Level {
					t.Errorf("site %s: the follower has level %d, the store %d", name, got.Level, want.Level)
				}
			}
			for i := range 20 { // site i last moved in the last round r with r%3 == i%3
				r := round
				for r%3 != i%3 {
					r--
				}
				if got := full.Sites[fmt.Sprintf("s%02d", i)].Level; got != r {
					t.Errorf("site s%02d at level %d; want %d", i, got, r)
				}
			}
			// The journal reads whole, from its first event.
			events, err := s.Events(ctx, 0, "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			if want := int(full.Meta.LastEvent); len(events) != want || want == 0 {
				t.Fatalf("journal: %d events; want %d", len(events), want)
			}
			for i, e := range events {
				if e.Seq != uint64(i+1) {
					t.Fatalf("journal: event %d has seq %d", i, e.Seq)
				}
			}
		})
	}
}

// BenchmarkHistory commits rounds of the 500-site fleet (500 records and
// 1,500 events a round) to an etcd at its defaults, without compaction
// and with a Compactor step every 5 rounds, and reports the space etcd's
// database uses at the end (its DbSizeInUse, read after the compaction's
// background work has had a second), in MB, side by side.
//
//	go test -run '^$' -bench History -benchtime 40x ./core/store/etcdstore/
func BenchmarkHistory(b *testing.B) {
	for _, bb := range []struct {
		name  string
		every int
	}{{"no compaction", 0}, {"compaction every 5 rounds", 5}} {
		b.Run(bb.name, func(b *testing.B) {
			srv := etcdtest.Start(b)
			cli := srv.Client(b)
			ctx := context.Background()
			s := newStore(cli, etcdstore.Options{Prefix: "/history"})
			c := s.Compactor()
			round := 0
			for b.Loop() {
				round++
				if err := s.Commit(ctx, fleetRound(round)); err != nil {
					b.Fatal(err)
				}
				if bb.every > 0 && round%bb.every == 0 {
					if _, err := c.Step(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			time.Sleep(time.Second) // let etcd's background compaction free its pages
			st, err := cli.Status(ctx, srv.Endpoint)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(st.DbSizeInUse)/1e6, "MB-in-use")
			b.ReportMetric(float64(st.DbSize)/1e6, "MB-file")
			b.ReportMetric(float64(c.Compactions()), "compactions")
		})
	}
}
