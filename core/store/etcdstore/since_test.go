package etcdstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/vigilcdn/vigil/core/store"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// TestLoadSince: after a full read, LoadSince returns the counters and
// only the sites written since, whether a commit fits in one transaction
// or is split (its records read from the staged set before they are
// copied to their keys).
func TestLoadSince(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		maxOps int
	}{{"one transaction", 0}, {"split", 5}} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(cli, etcdstore.Options{Prefix: fmt.Sprintf("/since-%d", tt.maxOps), MaxTxnOps: tt.maxOps})
			var sites []store.Site
			for i := range 20 {
				sites = append(sites, store.Site{Name: fmt.Sprintf("s%02d", i), Level: 1})
			}
			if err := s.Commit(ctx, store.Batch{Meta: store.Meta{Round: 1}, Sites: sites}); err != nil {
				t.Fatal(err)
			}
			full, rev, err := s.LoadSince(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(full.Sites) != 20 || rev == 0 {
				t.Fatalf("full read: %d sites at revision %d; want 20 at a revision", len(full.Sites), rev)
			}
			// Nothing written: no site, the counters as they are.
			none, rev2, err := s.LoadSince(ctx, rev)
			if err != nil {
				t.Fatal(err)
			}
			if len(none.Sites) != 0 || none.Meta.Round != 1 {
				t.Fatalf("nothing written since: %d sites, round %d; want none, round 1", len(none.Sites), none.Meta.Round)
			}
			// Three sites change (split at limit 5 with the counters).
			changed := []store.Site{{Name: "s03", Level: 2}, {Name: "s07", Level: 2}, {Name: "s11", Level: 2}, {Name: "s12", Level: 2}}
			if err := s.Commit(ctx, store.Batch{Meta: store.Meta{Round: 2}, Sites: changed}); err != nil {
				t.Fatal(err)
			}
			part, rev3, err := s.LoadSince(ctx, rev2)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for name, r := range part.Sites {
				names = append(names, name)
				if r.Level != 2 {
					t.Errorf("site %s: level %d, want 2", name, r.Level)
				}
			}
			slices.Sort(names)
			if want := []string{"s03", "s07", "s11", "s12"}; !slices.Equal(names, want) {
				t.Fatalf("changed since: %v; want %v", names, want)
			}
			if part.Meta.Round != 2 || rev3 <= rev2 {
				t.Fatalf("counters at round %d, revision %d after %d; want round 2 and a later revision", part.Meta.Round, rev3, rev2)
			}
			// And the full read agrees.
			all, err := s.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(all.Sites) != 20 || all.Sites["s07"].Level != 2 || all.Sites["s08"].Level != 1 {
				t.Fatalf("full read after: %d sites, s07 level %d, s08 level %d", len(all.Sites), all.Sites["s07"].Level, all.Sites["s08"].Level)
			}
		})
	}
}
