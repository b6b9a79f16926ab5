package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// twoSites is twoLevels with a second site, api, for sites owned elsewhere.
const twoSites = twoLevels + `
site "api" {
  hostname = "api.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}
`

// othersWrite stores what another instance decided: site's origin
// unhealthy after 3 failures. It returns the batch, for the test to commit
// when it chooses.
func othersWrite(t *testing.T, st store.Store, site, origin string) store.Batch {
	t.Helper()
	state, err := st.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := state.Sites[site]
	o := r.Origins[origin]
	o.State, o.Failures = "unhealthy", 3
	r.Origins[origin] = o
	return store.Batch{Meta: state.Meta, Sites: []store.Site{r}}
}

// countingStore fails its commits on demand and counts those it makes.
type countingStore struct {
	store.Store
	fail    atomic.Bool
	commits atomic.Int32
}

func (s *countingStore) Commit(ctx context.Context, b store.Batch) error {
	if s.fail.Load() {
		return errors.New("write vigil.db: no space left on device")
	}
	s.commits.Add(1)
	return s.Store.Commit(ctx, b)
}

func openCounting(t *testing.T, dir string) (*countingStore, *store.Bolt) {
	t.Helper()
	bolt, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	return &countingStore{Store: bolt}, bolt
}

// TestReloadKeepsUnsavedSites: a switch whose commit failed stays owed
// across a reload, so the next commit that publishes it also writes it,
// and a restart finds the level that nodes were told.
func TestReloadKeepsUnsavedSites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, bolt := openCounting(t, dir)
	src := enginetest.Sources{}
	e, d := engine.New(ctx, enginetest.Config(t, twoLevels), engine.Options{Store: st, NewSource: src.Factory()})
	if d.HasErrors() {
		t.Fatal(d.Error())
	}
	e.RunRound(ctx)
	e.RunRound(ctx)
	src["direct"].SetDown("www", "a1", true)
	src["direct"].SetDown("www", "a2", true)
	e.RunRound(ctx)
	e.RunRound(ctx)
	st.fail.Store(true)
	if r := e.RunRound(ctx); r.Saved || r.Events == 0 {
		t.Fatalf("the switch round: saved %v with %d events, want an unsaved round with events", r.Saved, r.Events)
	}
	if diags := e.Reload(ctx, enginetest.Config(t, twoLevels)); diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st.fail.Store(false)
	if r := e.RunRound(ctx); !r.Saved {
		t.Fatal("the round after the disk came back was not saved")
	}
	if got := e.Hub().Current().Sites[0].Level; got != 2 {
		t.Fatalf("published level %d, want 2", got)
	}
	e.Close()
	bolt.Close()

	again, _ := enginetest.Start(t, enginetest.Config(t, twoLevels), enginetest.Sources{}, dir)
	v := again.Views().Site("www")
	if v.Level != 2 || v.Origins["a1"].State != "unhealthy" {
		t.Fatalf("after a restart: level %d, a1 %s; the published switch was never saved", v.Level, v.Origins["a1"].State)
	}
}

// TestRoleLostDuringActionShowsNothing: an action whose commit finds the
// role gone is refused with ErrNotActive, and neither the views nor the
// publication ever show it.
func TestRoleLostDuringActionShowsNothing(t *testing.T) {
	ctx := context.Background()
	st, _ := openCounting(t, t.TempDir())
	var calls, lostAt atomic.Int32
	lostAt.Store(1 << 30)
	active := func() bool { return calls.Add(1) < lostAt.Load() }
	e, d := engine.New(ctx, enginetest.Config(t, twoLevels), engine.Options{Store: st, NewSource: enginetest.Sources{}.Factory(), Active: active})
	if d.HasErrors() {
		t.Fatal(d.Error())
	}
	t.Cleanup(e.Close)
	e.RunRound(ctx)
	version := e.Hub().Current().Version
	commits := st.commits.Load()
	lostAt.Store(calls.Load() + 2) // the action's own check passes; the commit's does not
	if _, err := e.Disable(ctx, "www", "a1", "alice"); !errors.Is(err, engine.ErrNotActive) {
		t.Fatalf("the action returned %v, want ErrNotActive", err)
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"no commit", st.commits.Load() == commits},
		{"views", e.Views().Site("www").Origins["a1"].State != "disabled"},
		{"publication version", e.Hub().Current().Version == version},
		{"publication content", len(e.Hub().Current().Sites[0].Origins) == 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Fatalf("an unsaved action showed: a1 %+v, hub v%d (was v%d), %d commits (was %d)",
					e.Views().Site("www").Origins["a1"], e.Hub().Current().Version, version, st.commits.Load(), commits)
			}
		})
	}
}

// TestPartialRefreshCommitsOnlyWhatIsNew: a sharded instance's refresh of
// the sites it does not own commits only when the publication changes, so
// that two instances never wake each other's refreshes in a loop; and a
// refresh that finds nothing new leaves a round in progress alone.
func TestPartialRefreshCommitsOnlyWhatIsNew(t *testing.T) {
	ctx := context.Background()
	st, _ := openCounting(t, t.TempDir())
	e, d := engine.New(ctx, enginetest.Config(t, twoLevels), engine.Options{Store: st, NewSource: enginetest.Sources{}.Factory()})
	if d.HasErrors() {
		t.Fatal(d.Error())
	}
	t.Cleanup(e.Close)
	e.RunRound(ctx)
	e.RunRound(ctx)
	unowned := func(string) bool { return true }

	before := st.commits.Load()
	version := e.Hub().Current().Version
	if err := e.RefreshSites(ctx, unowned); err != nil {
		t.Fatal(err)
	}
	if got := st.commits.Load() - before; got != 0 {
		t.Fatalf("a refresh that found nothing new made %d commits", got)
	}

	// Another instance switches the site: its record in the store changes.
	state, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := state.Sites["www"]
	r.Level = 2
	if err := st.Commit(ctx, store.Batch{Meta: state.Meta, Sites: []store.Site{r}}); err != nil {
		t.Fatal(err)
	}
	before = st.commits.Load()
	if err := e.RefreshSites(ctx, unowned); err != nil {
		t.Fatal(err)
	}
	if got := st.commits.Load() - before; got != 1 {
		t.Fatalf("a refresh that changed the publication made %d commits, want 1", got)
	}
	if cur := e.Hub().Current(); cur.Version <= version || cur.Sites[0].Level != 2 {
		t.Fatalf("publication v%d level %d after the refresh, want a version after v%d at level 2", cur.Version, cur.Sites[0].Level, version)
	}
	before = st.commits.Load()
	if err := e.RefreshSites(ctx, unowned); err != nil {
		t.Fatal(err)
	}
	if got := st.commits.Load() - before; got != 0 {
		t.Fatalf("the refresh after it made %d commits, want none", got)
	}
}

// gatedSource votes as enginetest.Source does once the test lets it: a
// round stays in progress while the test acts.
type gatedSource struct {
	*enginetest.Source
	entered chan struct{}
	release chan struct{}
}

func (g gatedSource) Vote(ctx context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
	return g.Source.Vote(ctx, b)
}

// TestPartialRefreshLeavesTheRoundAlone: reloading a site another instance
// owns, while this instance's round asks its sources, reloads it in place;
// the round is applied, not discarded.
func TestPartialRefreshLeavesTheRoundAlone(t *testing.T) {
	ctx := context.Background()
	cfg := enginetest.Config(t, twoSites)
	st, _ := openCounting(t, t.TempDir())
	gate := gatedSource{Source: enginetest.NewSource("direct"), entered: make(chan struct{}, 1), release: make(chan struct{})}
	e, d := engine.New(ctx, cfg, engine.Options{Store: st, Owns: func(site string) bool { return site == "www" },
		NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource { return gate }})
	if d.HasErrors() {
		t.Fatal(d.Error())
	}
	t.Cleanup(e.Close)

	batch := othersWrite(t, st, "api", "a1")

	done := make(chan engine.RoundResult)
	go func() { done <- e.RunRound(ctx) }()
	<-gate.entered
	if err := st.Commit(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := e.RefreshSites(ctx, func(site string) bool { return site == "api" }); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	res := <-done
	if res.Discarded || res.Probed != 1 {
		t.Fatalf("the round: discarded %v, probed %d; want it applied to www", res.Discarded, res.Probed)
	}
	if got := e.Views().Site("api").Origins["a1"].State; got != "unhealthy" {
		t.Fatalf("api's a1 is %s in the views, want the stored unhealthy", got)
	}
}

// TestHandoverDiscardsTheRound: when a site the round in progress planned
// is handed over (Owns turns false and the site is refreshed from the
// store), the round is discarded even though the site's record did not
// change, so it never writes the site after its new owner took it.
func TestHandoverDiscardsTheRound(t *testing.T) {
	ctx := context.Background()
	st, _ := openCounting(t, t.TempDir())
	var mine atomic.Bool
	mine.Store(true)
	gate := gatedSource{Source: enginetest.NewSource("direct"), entered: make(chan struct{}, 1), release: make(chan struct{})}
	e, d := engine.New(ctx, enginetest.Config(t, twoLevels), engine.Options{Store: st, Owns: func(string) bool { return mine.Load() },
		NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource { return gate }})
	if d.HasErrors() {
		t.Fatal(d.Error())
	}
	t.Cleanup(e.Close)
	done := make(chan engine.RoundResult)
	go func() { done <- e.RunRound(ctx) }()
	<-gate.entered
	mine.Store(false)
	commits := st.commits.Load()
	if err := e.RefreshSites(ctx, func(site string) bool { return site == "www" }); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	if res := <-done; !res.Discarded {
		t.Fatalf("the round that planned the handed-over site was not discarded: %+v", res)
	}
	if got := st.commits.Load() - commits; got != 0 {
		t.Fatalf("%d commits after the handover, want none", got)
	}
}

// TestInactiveRefreshIsPublishedLater: a shard between terms (not active)
// reloads another's change: it shows it in the views but publishes nothing,
// since it commits nothing; its first commit once active publishes it.
func TestInactiveRefreshIsPublishedLater(t *testing.T) {
	ctx := context.Background()
	cfg := enginetest.Config(t, twoSites)
	st, _ := openCounting(t, t.TempDir())
	var active atomic.Bool
	active.Store(true)
	e, d := engine.New(ctx, cfg, engine.Options{Store: st, NewSource: enginetest.Sources{}.Factory(),
		Active: active.Load, Owns: func(site string) bool { return site == "www" }})
	if d.HasErrors() {
		t.Fatal(d.Error())
	}
	t.Cleanup(e.Close)
	for range 3 { // www settles healthy: later rounds change nothing
		e.RunRound(ctx)
	}
	version := e.Hub().Current().Version

	batch := othersWrite(t, st, "api", "a1")
	if err := st.Commit(ctx, batch); err != nil {
		t.Fatal(err)
	}
	active.Store(false)
	if err := e.RefreshSites(ctx, func(site string) bool { return site == "api" }); err != nil {
		t.Fatal(err)
	}
	if got := e.Views().Site("api").Origins["a1"].State; got != "unhealthy" {
		t.Fatalf("views show api/a1 %s after the refresh, want unhealthy", got)
	}
	if got := e.Hub().Current().Version; got != version {
		t.Fatalf("an inactive instance published v%d (was v%d)", got, version)
	}
	active.Store(true)
	e.RunRound(ctx)
	cur := e.Hub().Current()
	var api *publication.Site
	for i := range cur.Sites {
		if cur.Sites[i].Name == "api" {
			api = &cur.Sites[i]
		}
	}
	if cur.Version == version || api == nil || len(api.Origins) == 0 || api.Origins[0].State != "unhealthy" {
		t.Fatalf("after the next commit: v%d (was v%d), api %+v; want the reloaded state published", cur.Version, version, api)
	}
}
