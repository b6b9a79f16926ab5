package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/store"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// TestLoadSites: LoadSites reads the named sites only, as Load reads
// them (probe marks folded into LastProbed, a committed split commit's
// staged records over their keys), with the counters and cursors whole,
// in transactions of max_txn_ops reads; a name with no record is absent.
func TestLoadSites(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ctx := context.Background()
	at := time.Unix(1_700_000_000, 0).UTC()
	for _, tt := range []struct {
		name   string
		maxOps int
		// staged: the second commit dies after its marker, so its
		// records are read from the staged set.
		staged bool
	}{
		{"on their keys", 0, false},
		{"small transactions", 6, false},
		{"staged set", 16, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prefix := fmt.Sprintf("/sites-%d-%v", tt.maxOps, tt.staged)
			s := newStore(cli, etcdstore.Options{Prefix: prefix, MaxTxnOps: tt.maxOps})
			first := store.Batch{Meta: store.Meta{Round: 1, Publication: 1}}
			for i := range 50 {
				first.Sites = append(first.Sites, store.Site{Name: fmt.Sprintf("s%02d", i), Level: 1, LastProbed: 1})
			}
			if err := s.Commit(ctx, first); err != nil {
				t.Fatal(err)
			}
			if err := s.SetCursor(ctx, "log", 7); err != nil {
				t.Fatal(err)
			}
			second := store.Batch{Meta: store.Meta{Round: 2, Publication: 2},
				Probed: []store.Probe{{Site: "s05", Round: 2, At: at}, {Site: "s06", Round: 2, At: at}}}
			for i := 10; i < 40; i++ {
				second.Sites = append(second.Sites, store.Site{Name: fmt.Sprintf("s%02d", i), Level: 2, LastProbed: 2})
			}
			w := s
			if tt.staged {
				w = newStore(cli, etcdstore.Options{Prefix: prefix, MaxTxnOps: tt.maxOps, AfterTxn: func(step string) error {
					if step == "marker" {
						return errKilled // the copy to the keys never happens
					}
					return nil
				}})
			}
			err := w.Commit(ctx, second)
			switch {
			case tt.staged && !errors.Is(err, errKilled):
				t.Fatalf("the second commit was not split and stopped after its marker: %v", err)
			case !tt.staged && err != nil:
				t.Fatal(err)
			}
			r := newStore(cli, etcdstore.Options{Prefix: prefix, MaxTxnOps: tt.maxOps})
			all, err := r.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			names := []string{"s05", "s06", "s09", "s10", "s20", "s39", "s49", "absent"}
			got, rev, err := r.LoadSites(ctx, names)
			if err != nil {
				t.Fatal(err)
			}
			if rev == 0 {
				t.Error("LoadSites gave no revision")
			}
			if len(got.Sites) != len(names)-1 {
				t.Errorf("LoadSites of %d names (one never stored) returned %d sites, want %d", len(names), len(got.Sites), len(names)-1)
			}
			for _, name := range names {
				g, ok := got.Sites[name]
				want, stored := all.Sites[name]
				if ok != stored {
					t.Errorf("site %s: returned %v, stored %v", name, ok, stored)
					continue
				}
				if ok && !reflect.DeepEqual(g, want) {
					t.Errorf("site %s: LoadSites read %+v, Load %+v", name, g, want)
				}
			}
			if g := got.Sites["s20"]; g.Level != 2 {
				t.Errorf("site s20 at level %d, want 2 (the second commit)", g.Level)
			}
			if g := got.Sites["s05"]; g.LastProbed != 2 || !g.LastProbedAt.Equal(at) {
				t.Errorf("site s05 last probed in round %d at %s, want its probe mark's round 2 at %s", g.LastProbed, g.LastProbedAt, at)
			}
			if got.Meta != all.Meta || got.Meta.Round != 2 {
				t.Errorf("counters %+v, want Load's %+v at round 2", got.Meta, all.Meta)
			}
			if got.Cursors["log"] != 7 {
				t.Errorf("cursors %v, want log at 7", got.Cursors)
			}
			// Nothing named: the counters only.
			none, _, err := r.LoadSites(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(none.Sites) != 0 || none.Meta.Round != 2 {
				t.Errorf("no names: %d sites, round %d; want none, round 2", len(none.Sites), none.Meta.Round)
			}
		})
	}
}
