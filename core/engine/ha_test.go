package engine_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
)

// TestStandbyRefresh: a standby on the same store runs no round, refuses
// actions, writes nothing, and after Refresh shows what the active
// instance committed, publication version included.
func TestStandbyRefresh(t *testing.T) {
	ctx := context.Background()
	cfg := enginetest.Config(t, twoLevels)
	src := enginetest.Sources{}
	leader, st := enginetest.Start(t, cfg, src, "")
	var standbyActive atomic.Bool
	standby, diags := engine.New(ctx, cfg, engine.Options{Store: st, NewSource: enginetest.Sources{}.Factory(), Active: standbyActive.Load})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Cleanup(standby.Close)

	src["direct"].SetDown("www", "a1", true)
	src["direct"].SetDown("www", "a2", true)
	for range 6 {
		leader.RunRound(ctx)
	}
	if leader.Views().Site("www").Level != 2 {
		t.Fatal("the active instance did not fail over")
	}
	before, _ := st.Load(ctx)
	if res := standby.RunRound(ctx); res.Probed != 0 {
		t.Fatalf("a standby probed %d sites", res.Probed)
	}
	if _, err := standby.Switch(ctx, "www", 1, "test"); !errors.Is(err, engine.ErrNotActive) {
		t.Fatalf("a standby's action returned %v, want ErrNotActive", err)
	}
	if err := standby.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := st.Load(ctx)
	if after.Meta != before.Meta {
		t.Fatalf("a standby wrote: meta %+v -> %+v", before.Meta, after.Meta)
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"level", standby.Views().Site("www").Level == 2},
		{"origin state", standby.Views().Site("www").Origins["a1"].State == "unhealthy"},
		{"publication version", standby.Hub().Current().Version == leader.Hub().Current().Version},
		{"publication level", standby.Hub().Current().Sites[0].Level == 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Fatalf("standby view %+v, hub v%d (leader v%d)", standby.Views().Site("www"), standby.Hub().Current().Version, leader.Hub().Current().Version)
			}
		})
	}

	// Taking over: the leader stops, the standby becomes active and
	// reloads before it acts.
	leader.Close()
	standbyActive.Store(true)
	if err := standby.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := standby.Switch(ctx, "www", 1, "test")
	if err != nil || len(evs) != 1 {
		t.Fatalf("the new active instance's switch: %v %v", evs, err)
	}
	all, _ := st.Events(ctx, 0, "", 1000)
	switches := 0
	for _, e := range all {
		if e.Event.Kind.String() == "level_switched" {
			switches++
		}
	}
	if switches != 2 {
		t.Fatalf("%d level switches journaled, want 2 (failover, manual): %+v", switches, all)
	}
}

func TestOwnsFiltersRounds(t *testing.T) {
	ctx := context.Background()
	cfg := enginetest.Config(t, twoSites)
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e, diags := engine.New(ctx, cfg, engine.Options{Store: st, NewSource: enginetest.Sources{}.Factory(),
		Owns: func(site string) bool { return site == "www" }})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Cleanup(e.Close)
	for round := uint64(1); round <= 3; round++ {
		if res := e.RunRound(ctx); res.Probed != 1 || e.Views().Site("www").Round != res.Round || e.Views().Site("api").Round != 0 {
			t.Fatalf("round %d probed %d sites (www last probed in round %d, api in %d), want only the owned site www",
				res.Round, res.Probed, e.Views().Site("www").Round, e.Views().Site("api").Round)
		}
	}
	if _, err := e.Switch(ctx, "api", 1, "test"); !errors.Is(err, engine.ErrNotActive) {
		t.Fatalf("an action on a site owned elsewhere returned %v, want ErrNotActive", err)
	}
}

// TestStandbyWithOtherSitesPublishesNothing: a standby whose configuration
// differs from the active instance's would compute other content than the
// stored publication; it must not publish that under the stored version,
// which nodes already hold with the leader's content.
func TestStandbyWithOtherSitesPublishesNothing(t *testing.T) {
	ctx := context.Background()
	leader, st := enginetest.Start(t, enginetest.Config(t, twoLevels), enginetest.Sources{}, "")
	for range 3 {
		leader.RunRound(ctx)
	}
	want := leader.Hub().Current()
	moved := strings.Replace(twoLevels, "127.0.0.1:18001", "127.0.0.1:18009", 1)
	standby, diags := engine.New(ctx, enginetest.Config(t, moved), engine.Options{Store: st, NewSource: enginetest.Sources{}.Factory(),
		Active: func() bool { return false }})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Cleanup(standby.Close)
	if err := standby.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got := standby.Hub().Current()
	if got.Version == want.Version && !reflect.DeepEqual(got.Sites, want.Sites) {
		t.Fatalf("version %d names two contents: the leader's %+v and the standby's %+v", got.Version, want.Sites, got.Sites)
	}
	if standby.Views().Site("www") == nil {
		t.Fatal("the standby shows no views")
	}
}
