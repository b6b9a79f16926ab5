package ha

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
	"github.com/vigilcdn/vigil/sdk"
)

// slowSource votes as enginetest.Source does, after a delay: a round's
// sources take long enough for the other shard's refreshes to land in it.
type slowSource struct {
	*enginetest.Source
	delay time.Duration
}

func (s slowSource) Vote(ctx context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Source.Vote(ctx, b)
}

// TestShardedRoundsAreNotDiscarded: two shards on one etcd. One's commits
// wake the other's refresh of the sites it does not own; a refresh that
// finds nothing new must neither commit (which would wake the first one's
// refresh, and so on in a loop) nor discard a round in progress. Before,
// the two reloaded each other some forty times a second, and every round
// whose sources took 300 ms was thrown away.
func TestShardedRoundsAreNotDiscarded(t *testing.T) {
	srv := etcdtest.Start(t)
	cfg := manySites(8)
	slow := func(c *config.Source, _ string, _ hclog.Logger) engine.VoteSource {
		return slowSource{Source: enginetest.NewSource(c.Name), delay: 300 * time.Millisecond}
	}
	a := startMemberWith(t, srv, "cp-a", config.ModeSharded, cfg, slow)
	b := startMember(t, srv, "cp-b", config.ModeSharded, cfg)
	waitFor(t, "two shards acting on shares that cover every site", 15*time.Second, func() bool {
		owned := 0
		for _, m := range []*member{a, b} {
			info := m.node.Info()
			if info.Role != RoleShard || !info.Acting || len(info.Members) != 2 || len(info.Owned) == 0 {
				return false
			}
			owned += len(info.Owned)
		}
		return owned == 8
	})
	ctx := etcdCtx(t)
	probed := 0
	for i := range 6 {
		rb := b.eng.RunRound(ctx) // the other shard commits, too
		ra := a.eng.RunRound(ctx)
		if ra.Discarded || rb.Discarded {
			t.Fatalf("round pair %d: cp-a's discarded %v, cp-b's %v (reloads: cp-a %d, cp-b %d)",
				i, ra.Discarded, rb.Discarded, a.node.reloads.Load(), b.node.reloads.Load())
		}
		probed += ra.Probed
	}
	if probed == 0 {
		t.Fatal("cp-a probed no site in 6 rounds")
	}
	// What cp-b decided of its own sites reached cp-a's views, reloaded
	// in place.
	theirs := b.node.Info().Owned[0]
	want := b.eng.Views().Site(theirs).Origins["a"].State
	if want != "healthy" {
		t.Fatalf("cp-b's site %s: origin a %s after 6 rounds, want healthy", theirs, want)
	}
	waitFor(t, "cp-a's view of cp-b's site "+theirs, 10*time.Second, func() bool {
		return a.eng.Views().Site(theirs).Origins["a"].State == want
	})
	// It read only what cp-b's commits wrote, not the whole store.
	if a.node.partialReloads.Load() == 0 {
		t.Errorf("cp-a followed cp-b's commits with %d reloads, none of only what changed", a.node.reloads.Load())
	}
}
