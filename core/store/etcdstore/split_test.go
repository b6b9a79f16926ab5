package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/store"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

const (
	fleetSites   = 500
	fleetOrigins = 3
)

// fleetRound is a round of the 500-site fleet: round 1 saves every site
// at level 1, its origins found healthy (fleetOrigins events a site);
// round 2 is the incident: every origin of level 1 fails and every site
// fails over to level 2 (fleetOrigins+1 events a site).
func fleetRound(round int) store.Batch {
	b := store.Batch{Meta: store.Meta{Round: uint64(round), Publication: uint64(round)}}
	for i := range fleetSites {
		name := fmt.Sprintf("site%03d", i)
		site := store.Site{Name: name, Level: round, Origins: map[string]store.Origin{}}
		for o := range fleetOrigins {
			oname := fmt.Sprintf("o%d", o)
			from, to := decide.Unknown, decide.Healthy
			if round == 2 {
				from, to = decide.Healthy, decide.Unhealthy
			}
			site.Origins[oname] = store.Origin{State: to.String(), Failures: int32(round - 1)}
			b.Events = append(b.Events, store.Event{Site: name, Round: uint64(round), Event: decide.Event{Kind: decide.KindOriginState, Origin: oname, From: from, To: to}})
		}
		if round == 2 {
			b.Events = append(b.Events, store.Event{Site: name, Round: 2, Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 1, ToLevel: 2, Reason: decide.ReasonFailover}})
		}
		b.Sites = append(b.Sites, site)
		b.Probed = append(b.Probed, store.Probe{Site: name, Round: uint64(round), At: time.Unix(int64(round), 0).UTC()})
	}
	return b
}

// fleetEvents is how many events the journal holds after round.
func fleetEvents(round int) uint64 {
	if round == 2 {
		return fleetSites*fleetOrigins + fleetSites*(fleetOrigins+1)
	}
	return fleetSites * fleetOrigins
}

// checkFleet asserts that st is the whole of round (and nothing of a
// later one): every site at its level, the counters and the journal.
func checkFleet(t *testing.T, s *etcdstore.Store, st *store.State, round int) {
	t.Helper()
	if st.Meta.Round != uint64(round) || st.Meta.LastEvent != fleetEvents(round) || st.Meta.Publication != uint64(round) {
		t.Fatalf("counters %+v, want those of round %d (last event %d)", st.Meta, round, fleetEvents(round))
	}
	if len(st.Sites) != fleetSites {
		t.Fatalf("%d sites, want %d", len(st.Sites), fleetSites)
	}
	for name, site := range st.Sites {
		// A probe mark may be ahead of the committed round: marks are
		// written first, outside the round's atomic part (doc.go).
		if site.Level != round || site.LastProbed < uint64(round) {
			t.Fatalf("site %s at level %d probed in round %d: a reader sees part of a round (want all of round %d)", name, site.Level, site.LastProbed, round)
		}
	}
	evs, err := s.Events(context.Background(), 0, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(evs)) != fleetEvents(round) {
		t.Fatalf("the journal has %d events, want %d", len(evs), fleetEvents(round))
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: the journal has a gap or a duplicate", i, e.Seq)
		}
	}
}

// leaderFence starts a term: a key on a lease, as the election's.
func leaderFence(t *testing.T, cli *clientv3.Client, key string) keyFence {
	t.Helper()
	put, err := cli.Put(context.Background(), key, "leader")
	if err != nil {
		t.Fatal(err)
	}
	return keyFence{key, put.Header.Revision}
}

// leftovers counts the keys of split commits still in etcd.
func leftovers(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	var n int64
	for _, p := range []string{"/staged/", "/staging/", "/applying/"} {
		resp, err := cli.Get(context.Background(), prefix+p, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		n += resp.Count
	}
	return n
}

// TestFleetFailsOverOnDefaultEtcd is the blocker: on etcd at its
// defaults (--max-txn-ops 128), 500 sites of 3 origins are saved (2,002
// operations) and then all fail over in one round (3,502 operations).
// A reader loading all along sees either the whole of a round or none of
// it, and the journal stays contiguous.
func TestFleetFailsOverOnDefaultEtcd(t *testing.T) {
	srv := etcdtest.Start(t) // no --max-txn-ops: etcd's 128
	cli := srv.Client(t)
	ctx := context.Background()
	s := newStore(cli, etcdstore.Options{Prefix: "/fleet", Fence: leaderFence(t, cli, "/fleet/leader/1")})
	if used, configured, err := s.ProbeLimit(ctx); err != nil || used != 128 || configured != 128 {
		t.Fatalf("ProbeLimit = %d, %d, %v; want etcd's default 128", used, configured, err)
	}
	if err := s.Commit(ctx, fleetRound(1)); err != nil {
		t.Fatalf("the first save of 500 sites: %v", err)
	}
	reader := newStore(srv.Client(t), etcdstore.Options{Prefix: "/fleet"})
	st, err := reader.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkFleet(t, reader, st, 1)

	// A standby loads over and over while the incident round commits.
	stop := make(chan struct{})
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			st, err := reader.Load(ctx)
			if err != nil {
				errs <- err
				return
			}
			round := int(st.Meta.Round)
			for name, site := range st.Sites {
				if site.Level != round {
					errs <- fmt.Errorf("a reader saw site %s at level %d under the counters of round %d: part of a round", name, site.Level, round)
					return
				}
			}
			if st.Meta.LastEvent != fleetEvents(round) {
				errs <- fmt.Errorf("a reader saw last event %d under round %d", st.Meta.LastEvent, round)
				return
			}
			reads.Add(1)
		}
	}()
	err = s.Commit(ctx, fleetRound(2))
	close(stop)
	wg.Wait()
	close(errs)
	if err != nil {
		t.Fatalf("the incident round of 500 sites: %v", err)
	}
	for err := range errs {
		t.Fatal(err)
	}
	st, err = reader.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkFleet(t, reader, st, 2)
	if n := leftovers(t, cli, "/fleet"); n != 0 {
		t.Fatalf("%d keys of the split commit left in etcd", n)
	}
	t.Logf("%d loads during the incident round, each whole", reads.Load())
}

var errKilled = errors.New("killed by the test")

// TestSplitCommitCrash kills a split commit (the store's AfterTxn hook:
// nothing more is written, nothing cleaned up, as with kill -9) between
// its transactions. A new leader's store then sees all of the round or
// none of it, the round is saved again (or goes on) without a lost or
// duplicated event, and nothing of the split commit is left behind.
func TestSplitCommitCrash(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ctx := context.Background()
	for i, tt := range []struct {
		step      string
		committed bool // the round is saved when the writer dies
	}{
		{"staged 1", false},
		{"staged 10", false},
		{"marker", true},
		{"copied 1", true},
		{"copied 8", true},
	} {
		t.Run(tt.step, func(t *testing.T) {
			prefix := fmt.Sprintf("/crash%d", i)
			var armed atomic.Bool
			old := newStore(cli, etcdstore.Options{Prefix: prefix, Fence: leaderFence(t, cli, prefix+"/leader/1"),
				AfterTxn: func(step string) error {
					if armed.Load() && step == tt.step {
						return errKilled
					}
					return nil
				}})
			if err := old.Commit(ctx, fleetRound(1)); err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			if err := old.Commit(ctx, fleetRound(2)); !errors.Is(err, errKilled) {
				t.Fatalf("the commit went past step %q (%v)", tt.step, err)
			}
			// A new leader takes over.
			next := newStore(cli, etcdstore.Options{Prefix: prefix, Fence: leaderFence(t, cli, prefix+"/leader/2")})
			st, err := next.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.committed {
				checkFleet(t, next, st, 1)
				// The engine kept the round pending: it is saved again.
				if err := next.Commit(ctx, fleetRound(2)); err != nil {
					t.Fatal(err)
				}
				if st, err = next.Load(ctx); err != nil {
					t.Fatal(err)
				}
			}
			checkFleet(t, next, st, 2)
			// The next commit copies a committed set to its keys; the
			// journal goes on from the round's last event.
			more := store.Batch{Meta: store.Meta{Round: 3, Publication: 2}, Sites: []store.Site{{Name: "site000", Level: 2}},
				Events: []store.Event{{Site: "site000", Round: 3, Event: decide.Event{Kind: decide.KindFailbackAvailable, Level: 1}}}}
			if err := next.Commit(ctx, more); err != nil {
				t.Fatal(err)
			}
			evs, err := next.Events(ctx, fleetEvents(2)-1, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 || evs[0].Seq != fleetEvents(2) || evs[1].Seq != fleetEvents(2)+1 || evs[1].Event.Kind != decide.KindFailbackAvailable {
				t.Fatalf("the journal after the round: %+v", evs)
			}
			keys, err := cli.Get(ctx, prefix+"/events/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			if uint64(keys.Count) != fleetEvents(2)+1 {
				t.Fatalf("%d event keys, want %d", keys.Count, fleetEvents(2)+1)
			}
			if n := leftovers(t, cli, prefix+"/applying"); n != 0 {
				t.Fatalf("%d commit markers left after the roll-forward", n)
			}
			if tt.committed {
				if n := leftovers(t, cli, prefix); n != 0 {
					t.Fatalf("%d keys of the split commit left in etcd", n)
				}
			}
		})
	}
}

// TestProbeLimit: against an etcd that takes fewer operations than
// max_txn_ops says, the store finds the real limit, and a large commit
// goes through even before anyone asked.
func TestProbeLimit(t *testing.T) {
	srv := etcdtest.Start(t, "--max-txn-ops", "40")
	cli := srv.Client(t)
	ctx := context.Background()
	t.Run("asked", func(t *testing.T) {
		s := newStore(cli, etcdstore.Options{Prefix: "/p1", MaxTxnOps: 128})
		used, configured, err := s.ProbeLimit(ctx)
		if err != nil || used != 40 || configured != 128 {
			t.Fatalf("ProbeLimit = %d, %d, %v; want 40 of 128", used, configured, err)
		}
	})
	t.Run("found by a refused commit", func(t *testing.T) {
		s := newStore(cli, etcdstore.Options{Prefix: "/p2", MaxTxnOps: 128})
		b := store.Batch{Meta: store.Meta{Round: 1}}
		for i := range 100 {
			name := fmt.Sprintf("s%03d", i)
			b.Sites = append(b.Sites, store.Site{Name: name, Level: 1})
		}
		if err := s.Commit(ctx, b); err != nil {
			t.Fatalf("a commit of 101 operations against etcd's 40: %v", err)
		}
		st, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Sites) != 100 || st.Meta.Round != 1 {
			t.Fatalf("%d sites, round %d", len(st.Sites), st.Meta.Round)
		}
	})
}

// TestSplitDeletion: a split commit that deletes sites (configuration
// change) hides them at once, and a deletion made after a split commit
// that was not copied yet is not undone by it.
func TestSplitDeletion(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ctx := context.Background()
	s := newStore(cli, etcdstore.Options{Prefix: "/d", MaxTxnOps: 16, AfterTxn: func(step string) error {
		if step == "marker" {
			return errKilled // the copy never happens
		}
		return nil
	}})
	b := store.Batch{Meta: store.Meta{Round: 1}}
	for i := range 40 {
		b.Sites = append(b.Sites, store.Site{Name: fmt.Sprintf("s%02d", i), Level: 1})
	}
	if err := s.Commit(ctx, b); !errors.Is(err, errKilled) {
		t.Fatalf("want the hook's error, got %v", err)
	}
	next := newStore(cli, etcdstore.Options{Prefix: "/d", MaxTxnOps: 16})
	st, err := next.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Sites) != 40 {
		t.Fatalf("%d sites after the marker, want 40", len(st.Sites))
	}
	// A small commit deleting two of them: the store first copies the
	// committed set, so it cannot come back over the deletion.
	if err := next.Commit(ctx, store.Batch{Meta: store.Meta{Round: 2}, Deleted: []string{"s00", "s01"}}); err != nil {
		t.Fatal(err)
	}
	// A split one deleting many.
	del := store.Batch{Meta: store.Meta{Round: 3}}
	for i := 2; i < 30; i++ {
		del.Deleted = append(del.Deleted, fmt.Sprintf("s%02d", i))
	}
	if err := next.Commit(ctx, del); err != nil {
		t.Fatal(err)
	}
	st, err = newStore(cli, etcdstore.Options{Prefix: "/d"}).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Sites) != 10 {
		t.Fatalf("%d sites left, want 10: %v", len(st.Sites), st.Sites)
	}
	if n := leftovers(t, cli, "/d"); n != 0 {
		t.Fatalf("%d keys of split commits left", n)
	}
}

// TestLargeRecords: records large enough that 128 of them pass etcd's
// default --max-request-bytes (1.5 MiB) are split by size as well.
func TestLargeRecords(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	s := newStore(srv.Client(t), etcdstore.Options{Prefix: "/big"})
	long := strings.Repeat("x", 16<<10)
	for _, n := range []int{60, 300} { // one transaction by count, not by size; and split
		b := store.Batch{Meta: store.Meta{Round: uint64(n)}}
		for i := range n {
			b.Sites = append(b.Sites, store.Site{Name: fmt.Sprintf("s%03d", i), Level: 1,
				Origins: map[string]store.Origin{"a": {State: "unhealthy", Reason: long}}})
		}
		if err := s.Commit(ctx, b); err != nil {
			t.Fatalf("%d records of 16 KiB: %v", n, err)
		}
	}
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Sites) != 300 || st.Sites["s299"].Origins["a"].Reason != long {
		t.Fatalf("%d sites loaded", len(st.Sites))
	}
}
