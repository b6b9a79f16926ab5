package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

// stuckSource votes only when released: a plugin that hangs in a round.
type stuckSource struct {
	inVote  chan struct{}
	release chan struct{}
}

func (s *stuckSource) Name() string                          { return "direct" }
func (s *stuckSource) Start(context.Context) hcl.Diagnostics { return nil }
func (s *stuckSource) Close()                                {}
func (s *stuckSource) Vote(ctx context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	s.inVote <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var out []sdk.Vote
	for _, t := range b.Targets {
		out = append(out, sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: "direct", Value: sdk.Up, Reason: sdk.ReasonOK})
	}
	return out, nil
}

// TestActionsAndReadsDoNotWaitForVotes: while a round's source hangs,
// operator actions, reads and reloads go through at once; the reload
// makes the hanging round discard its votes.
func TestActionsAndReadsDoNotWaitForVotes(t *testing.T) {
	ctx := context.Background()
	cfg := enginetest.Config(t, twoLevels)
	src := &stuckSource{inVote: make(chan struct{}), release: make(chan struct{})}
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e, diags := engine.New(ctx, cfg, engine.Options{Store: st, Logger: hclog.NewNullLogger(),
		NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource { return src }})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Cleanup(e.Close)
	done := make(chan engine.RoundResult, 1)
	go func() { done <- e.RunRound(ctx) }()
	<-src.inVote // the round is now waiting on its source

	within := func(what string, f func()) {
		t.Helper()
		finished := make(chan struct{})
		go func() { f(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(time.Minute):
			t.Fatalf("%s waited for the hanging source", what)
		}
	}
	within("a manual switch", func() {
		if _, err := e.Switch(ctx, "www", 2, "alice"); err != nil {
			t.Error(err)
		}
	})
	within("a read", func() {
		if v := e.Views().Site("www"); v == nil || v.Level != 2 {
			t.Errorf("view after the switch: %+v", v)
		}
	})
	within("a reload", func() {
		if d := e.Reload(ctx, enginetest.Config(t, twoLevels)); d.HasErrors() {
			t.Error(d.Error())
		}
	})
	close(src.release)
	res := <-done
	if !res.Discarded {
		t.Fatalf("the round that voted across a reload was applied: %+v", res)
	}
	if v := e.Views().Site("www"); v.Round != 0 || v.Origins["a1"].State != "unknown" {
		t.Fatalf("the discarded round changed the site: %+v", v)
	}
	// The next round runs normally.
	go func() { <-src.inVote }()
	if res := e.RunRound(ctx); res.Discarded || res.Probed != 1 {
		t.Fatalf("next round %+v", res)
	}
}
