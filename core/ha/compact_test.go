package ha

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// TestLeaderCompactsEtcd: with compaction_interval set, the leader
// compacts etcd's history (its metrics say so, and etcd refuses a read
// at an old revision), the standby does not, keeps following the
// leader's commits past the compactions, and takes over from a full read
// without losing a site; then it compacts in its turn.
func TestLeaderCompactsEtcd(t *testing.T) {
	srv := etcdtest.Start(t) // etcd at its defaults: no auto-compaction
	const interval = time.Second
	compacting := func(ec *config.EtcdStore) { ec.CompactionInterval = interval }
	var ms []*member
	for _, id := range []string{"cp-a", "cp-b"} {
		ms = append(ms, startMemberConfig(t, srv, id, config.ModeActiveStandby, manySites(20), enginetest.Sources{}.Factory(), compacting))
	}
	leader := settled(t, ms, 10*time.Second)
	standby := others(ms, leader)[0]
	cli := leader.cli
	ctx := t.Context()
	runRound := func(m *member) uint64 {
		t.Helper()
		res := m.eng.RunRound(ctx)
		if !res.Saved {
			t.Fatalf("%s's round: %+v", m.id, res)
		}
		return res.Round
	}
	for range 3 {
		runRound(leader)
	}

	// Wait on the leader's own count: two compactions (the first step
	// only learns where it stands). The deadline only catches a hang.
	waitFor(t, "the leader's second compaction", 60*time.Second, func() bool {
		return leader.node.compactor.Compactions() >= 2
	})
	compacted := leader.node.compactor.Compacted()
	if got := testutil.ToFloat64(leader.node.metrics.compactions); got < 2 {
		t.Fatalf("vigil_etcd_compactions_total %v; want at least 2", got)
	}
	if got := testutil.ToFloat64(leader.node.metrics.compacted); got < float64(compacted) || compacted == 0 {
		t.Fatalf("vigil_etcd_compacted_revision %v; want at least %d (> 0)", got, compacted)
	}
	if n := standby.node.compactor.Compactions(); n != 0 {
		t.Fatalf("the standby compacted %d times; only the leader compacts in active-standby", n)
	}
	if _, err := cli.Get(etcdCtx(t), testPrefix+"/meta", clientv3.WithRev(1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("a read at revision 1 after a compaction to %d: %v; want ErrCompacted", compacted, err)
	}

	// The standby still follows the leader's commits after the compaction.
	r := runRound(leader)
	waitFor(t, "the standby to show the round after the compaction", 3*testTTL, func() bool {
		return standby.eng.Views().Round == r
	})

	// The leader goes; the standby takes over from a full read.
	leader.stop()
	next := settled(t, []*member{standby}, 3*testTTL)
	st, err := next.st.Load(etcdCtx(t))
	if err != nil {
		t.Fatalf("loading the state after the compactions: %v", err)
	}
	if len(st.Sites) != 20 {
		t.Fatalf("the state has %d sites after the compactions; want 20", len(st.Sites))
	}
	if v := next.eng.Views(); v == nil {
		t.Fatal("the new leader has no views after its takeover")
	}
	if got := runRound(next); got != r+1 {
		t.Fatalf("the new leader's first round is %d; want %d (it loaded the state whole)", got, r+1)
	}
	waitFor(t, "the new leader's own compaction", 60*time.Second, func() bool {
		return next.node.compactor.Compactions() >= 1
	})
	if c := next.node.compactor.Compacted(); c <= compacted {
		t.Fatalf("the new leader compacted to %d, not past the old leader's %d", c, compacted)
	}
}

// TestShardsCompactInTurn: in sharded mode every shard is active, and
// the turns on P/compact keep them from compacting twice an interval:
// each compaction took a turn of its own (the key's version counts the
// turns taken), and the shards' compacted revisions never repeat.
func TestShardsCompactInTurn(t *testing.T) {
	srv := etcdtest.Start(t)
	compacting := func(ec *config.EtcdStore) { ec.CompactionInterval = time.Second }
	var ms []*member
	for _, id := range []string{"cp-a", "cp-b", "cp-c"} {
		ms = append(ms, startMemberConfig(t, srv, id, config.ModeSharded, manySites(12), enginetest.Sources{}.Factory(), compacting))
	}
	total := func() (n int64) {
		for _, m := range ms {
			n += m.node.compactor.Compactions()
		}
		return n
	}
	waitFor(t, "four compactions among the shards", 60*time.Second, func() bool { return total() >= 4 })
	for _, m := range ms {
		m.stop()
	}
	n := total()
	resp, err := srv.Client(t).Get(etcdCtx(t), testPrefix+"/compact")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading %s/compact: %v %v", testPrefix, resp, err)
	}
	// Each compaction is a turn taken, and each shard's first turn
	// (if it had one) compacted nothing.
	if turns := resp.Kvs[0].Version; n > turns {
		t.Fatalf("%d compactions in %d turns: two shards compacted in one interval", n, turns)
	}
	seen := map[int64]string{}
	for _, m := range ms {
		c := m.node.compactor.Compacted()
		if c == 0 {
			continue
		}
		if other, ok := seen[c]; ok {
			t.Fatalf("%s and %s both compacted to revision %d", other, m.id, c)
		}
		seen[c] = m.id
	}
}
