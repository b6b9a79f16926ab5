package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
)

const claimHCL = `
control {
  round_interval = "30s"
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = "http://127.0.0.1:2"
    level   = 2
  }
}
site "api" {
  hostname = "api.example.com"
  origin "a1" { address = "http://127.0.0.1:3" }
  origin "b1" {
    address = "http://127.0.0.1:4"
    level   = 2
  }
}
site "img" {
  hostname = "img.example.com"
  origin "a1" { address = "http://127.0.0.1:5" }
  origin "b1" {
    address = "http://127.0.0.1:6"
    level   = 2
  }
}
`

// owner is a shard's Options.Owns that the test changes.
type owner struct {
	mu    sync.Mutex
	sites map[string]bool
}

func newOwner(sites ...string) *owner {
	o := &owner{sites: map[string]bool{}}
	o.add(sites...)
	return o
}

func (o *owner) owns(site string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sites[site]
}

func (o *owner) add(sites ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range sites {
		o.sites[s] = true
	}
}

// failedOver is the stored record of a site that another shard failed
// over to level 2: what a claim reads.
func failedOver(site string) *store.State {
	return &store.State{Sites: map[string]store.Site{site: {
		Name: site, Level: 2,
		Origins: map[string]store.Origin{"a1": {State: "unhealthy", Failures: 3}, "b1": {State: "healthy", Successes: 2}},
	}}}
}

// gate is a commit hook that, once armed, holds the next commit until
// released, with the engine's lock held.
type gate struct {
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

func (g *gate) hook() {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(g.entered)
		<-g.release
	}
}

// waitClosed fails the test when ch is not closed within a minute: a
// guard against a hang, not a bound.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%s: still waiting after a minute", what)
	}
}

// TestClaimDoesNotWaitForACommit: a shard claims a site while its round
// is committing (the commit held, the engine's lock with it). The claim
// returns, and the site counts as owned, before the commit is let go; the
// engine takes the stored record in right after that commit, before the
// round lets its lock go; the next round probes the claimed site from
// its stored state, not from what the shard held before.
func TestClaimDoesNotWaitForACommit(t *testing.T) {
	for _, tt := range []struct {
		name   string
		stored *store.State
		level  int
	}{
		{"stored failed over", failedOver("api"), 2},
		{"nothing stored", &store.State{Sites: map[string]store.Site{}}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, err := store.Open(t.TempDir(), 0)
			if err != nil {
				t.Fatal(err)
			}
			own := newOwner("www")
			g := newGate()
			src := enginetest.NewSource("direct")
			e, diags := engine.New(context.Background(), enginetest.Config(t, claimHCL), engine.Options{Store: st,
				Registerer: prometheus.NewRegistry(), Owns: own.owns, Hooks: &engine.Hooks{BeforeCommit: g.hook},
				NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource { return src }})
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			t.Cleanup(func() { e.Close(); st.Close() })
			if res := e.RunRound(context.Background()); res.Probed != 1 || !res.Saved {
				t.Fatalf("first round: %+v, want www probed and saved", res)
			}

			g.arm()
			roundDone := make(chan engine.RoundResult, 1)
			go func() { roundDone <- e.RunRound(context.Background()) }()
			waitClosed(t, g.entered, "the round's commit")

			claimed := make(chan struct{})
			go func() {
				e.Claim(context.Background(), tt.stored, []string{"api"}, func() { own.add("api") })
				close(claimed)
			}()
			waitClosed(t, claimed, "the claim, while a commit is held")
			select {
			case res := <-roundDone:
				t.Fatalf("the round ended (%+v) though its commit is held", res)
			default:
			}
			if !own.owns("api") {
				t.Fatal("api is not owned after the claim returned")
			}
			close(g.release)
			var res engine.RoundResult
			select {
			case res = <-roundDone:
			case <-time.After(time.Minute):
				t.Fatal("the round did not end after its commit was let go")
			}
			if res.Probed != 1 || !res.Saved {
				t.Fatalf("held round: %+v, want www alone probed (api was claimed after it planned), saved", res)
			}
			// Taken in before the round let its lock go.
			if lvl := e.Views().Site("api").Level; lvl != tt.level {
				t.Fatalf("api on level %d after the round, want %d as stored", lvl, tt.level)
			}
			res = e.RunRound(context.Background())
			if res.Probed != 2 || res.Discarded || res.Claimed != 1 {
				t.Fatalf("round after the claim: %+v, want www and api probed, api as claimed", res)
			}
			if lvl := e.Views().Site("api").Level; lvl != tt.level {
				t.Fatalf("api on level %d after its first probe, want %d: its stored state, not the shard's own", lvl, tt.level)
			}
		})
	}
}

// TestTakeoverRound: with round_interval = "30s", a site claimed at 40 s
// is probed by a takeover round at 40 s, alone, and then with the others
// by the round of 60 s, which keeps its time; one claimed 2 s before a
// round (inside the confirmation margin) waits for that round. On the
// bubble's fake clock.
func TestTakeoverRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := store.Open(t.TempDir(), 0)
		if err != nil {
			t.Fatal(err)
		}
		own := newOwner("www")
		src := enginetest.NewSource("direct")
		src.SetDown("api", "a1", true) // still down, as the stored record says
		src.SetDown("img", "a1", true)
		log := &roundLog{t0: time.Now()}
		var mu sync.Mutex
		var takeovers []engine.RoundResult
		e, diags := engine.New(context.Background(), enginetest.Config(t, claimHCL), engine.Options{Store: st,
			Registerer: prometheus.NewRegistry(), Owns: own.owns,
			NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource { return src },
			AfterRound: func(res engine.RoundResult) {
				log.add(res)
				if res.Takeover {
					mu.Lock()
					takeovers = append(takeovers, res)
					mu.Unlock()
				}
			}})
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); e.Run(ctx) }()
		defer func() { cancel(); <-done; e.Close(); st.Close() }()

		sleepTo(log, 40*time.Second)
		e.Claim(context.Background(), failedOver("api"), []string{"api"}, func() { own.add("api") })
		synctest.Wait()
		sleepTo(log, 58*time.Second)
		e.Claim(context.Background(), failedOver("img"), []string{"img"}, func() { own.add("img") })
		synctest.Wait()
		sleepTo(log, 61*time.Second)

		got := log.get()
		want := []ranRound{
			{at: 0, probed: 1, seq: 1},
			{at: 30 * time.Second, probed: 1, seq: 2},
			{at: 40 * time.Second, probed: 1, seq: 3}, // the takeover round: api alone
			{at: 60 * time.Second, probed: 3, seq: 4}, // www, api, and img claimed at 58 s
		}
		if !slices.Equal(got, want) {
			t.Fatalf("rounds %+v, want %+v", got, want)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(takeovers) != 1 || takeovers[0].Round != 3 || takeovers[0].Claimed != 1 {
			t.Fatalf("takeover rounds %+v, want one, round 3, of the one claimed site", takeovers)
		}
		for _, s := range []string{"api", "img"} {
			if lvl := e.Views().Site(s).Level; lvl != 2 {
				t.Errorf("%s on level %d, want 2 as stored", s, lvl)
			}
		}
	})
}
