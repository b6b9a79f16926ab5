package ha

import (
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// TestAssignIsStableAndSpread: rendezvous hashing gives every site one
// owner among the members, spreads sites over them, and when a member
// leaves moves only that member's sites.
func TestAssignIsStableAndSpread(t *testing.T) {
	members := []string{"cp-a", "cp-b", "cp-c"}
	count := map[string]int{}
	owner := map[string]string{}
	for i := range 3000 {
		site := fmt.Sprintf("s%04d", i)
		o := Assign(site, members)
		owner[site] = o
		count[o]++
		if again := Assign(site, []string{"cp-c", "cp-a", "cp-b"}); again != o {
			t.Fatalf("site %s: owner %s depends on the members' order (%s)", site, o, again)
		}
	}
	for _, m := range members {
		if n := count[m]; n < 800 || n > 1200 {
			t.Errorf("%s owns %d of 3000 sites; want about 1000", m, n)
		}
	}
	for site, o := range owner {
		after := Assign(site, []string{"cp-a", "cp-c"})
		if o != "cp-b" && after != o {
			t.Fatalf("site %s moved from %s to %s when only cp-b left", site, o, after)
		}
	}
	if Assign("www", nil) != "" {
		t.Error("a site with no member has an owner")
	}
}

// TestOwnershipFollowsTheMembers: three real shards on a real etcd own
// every site exactly once, as Assign says; when one stops, the two others
// take its sites and keep their own.
func TestOwnershipFollowsTheMembers(t *testing.T) {
	srv := etcdtest.Start(t)
	const sites = 30
	cfg := manySites(sites)
	ms := []*member{
		startMember(t, srv, "cp-a", config.ModeSharded, cfg),
		startMember(t, srv, "cp-b", config.ModeSharded, cfg),
		startMember(t, srv, "cp-c", config.ModeSharded, cfg),
	}
	owners := func(live []*member) (map[string]string, bool) {
		owner := map[string]string{}
		ids := make([]string, len(live))
		for i, m := range live {
			ids[i] = m.id
			info := m.node.Info()
			if !info.Acting || len(info.Members) != len(live) {
				return nil, false
			}
			for _, s := range info.Owned {
				if prev, dup := owner[s]; dup {
					t.Fatalf("site %s owned by %s and %s at once", s, prev, m.id)
				}
				owner[s] = m.id
			}
		}
		if len(owner) != sites {
			return nil, false
		}
		for s, o := range owner {
			if want := Assign(s, ids); o != want {
				return nil, false // a handover is still under way
			}
		}
		return owner, true
	}
	var before map[string]string
	waitFor(t, "three shards owning every site as Assign says", 20*time.Second, func() bool {
		var ok bool
		before, ok = owners(ms)
		return ok
	})
	ms[1].stop() // cp-b ends its term: its lease goes, its sites move
	var after map[string]string
	waitFor(t, "two shards owning every site after cp-b left", 6*testTTL, func() bool {
		var ok bool
		after, ok = owners([]*member{ms[0], ms[2]})
		return ok
	})
	for s, o := range before {
		if o != "cp-b" && after[s] != o {
			t.Errorf("site %s moved from %s to %s though its owner stayed", s, o, after[s])
		}
		if after[s] == "cp-b" {
			t.Errorf("site %s still owned by the member that left", s)
		}
	}
}

// ownerRevisions reads the owner keys: the owner of each site and the
// distinct create revisions of each owner's keys (one per claim
// transaction).
func ownerRevisions(t *testing.T, cli *clientv3.Client) (owner map[string]string, txns map[string]int) {
	t.Helper()
	prefix := testPrefix + "/owners/"
	resp, err := cli.Get(etcdCtx(t), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	owner, txns = map[string]string{}, map[string]int{}
	revs := map[string]map[int64]bool{}
	for _, kv := range resp.Kvs {
		id := string(kv.Value)
		owner[strings.TrimPrefix(string(kv.Key), prefix)] = id
		if revs[id] == nil {
			revs[id] = map[int64]bool{}
		}
		revs[id][kv.CreateRevision] = true
	}
	for id, r := range revs {
		txns[id] = len(r)
	}
	return owner, txns
}

// TestShardColdStartAndTakeover: three shards on a real etcd with 1,500
// sites. Each claims its share in batches of max_txn_ops guarded puts,
// not one transaction a site, so a cold start and a takeover take about
// the lease plus a round, not minutes. A member whose etcd client dies
// (a kill, as etcd sees it: its lease is not revoked but expires) loses
// its sites to the two others. The times are figures (t.Logf), not
// assertions: the waits only catch a hang.
func TestShardColdStartAndTakeover(t *testing.T) {
	srv := etcdtest.Start(t)
	const sites = 1500
	cfg := manySites(sites)
	start := time.Now()
	ms := []*member{
		startMember(t, srv, "cp-a", config.ModeSharded, cfg),
		startMember(t, srv, "cp-b", config.ModeSharded, cfg),
		startMember(t, srv, "cp-c", config.ModeSharded, cfg),
	}
	// The members start one after the other (each builds its engine
	// first): the first claims every site, then hands shares over.
	last := time.Now()
	// Every site owned once, by the member Assign names (the rendezvous
	// share), and acting.
	shares := func(live []*member) (map[string]int, bool) {
		ids := make([]string, len(live))
		for i, m := range live {
			ids[i] = m.id
		}
		count := map[string]int{}
		seen := map[string]string{}
		for _, m := range live {
			info := m.node.Info()
			if !info.Acting || len(info.Members) != len(live) {
				return nil, false
			}
			for _, s := range info.Owned {
				if prev, dup := seen[s]; dup {
					t.Fatalf("site %s owned by %s and %s at once", s, prev, m.id)
				}
				seen[s] = m.id
				if Assign(s, ids) != m.id {
					return nil, false // a handover is still under way
				}
				count[m.id]++
			}
		}
		return count, len(seen) == sites
	}
	var count map[string]int
	waitFor(t, "three shards owning every site as Assign says", 60*time.Second, func() bool {
		var ok bool
		count, ok = shares(ms)
		return ok
	})
	t.Logf("figure: cold start of 3 shards, %d sites: every site owned at its rendezvous share %s after the first started, %s after the last (lease_ttl %s): %v",
		sites, time.Since(start).Round(time.Millisecond), time.Since(last).Round(time.Millisecond), testTTL, count)

	// Claimed in batches: far fewer claim transactions than sites.
	owner, txns := ownerRevisions(t, ms[0].cli)
	if len(owner) != sites {
		t.Fatalf("%d owner keys in etcd, want %d", len(owner), sites)
	}
	batch := ms[0].st.MaxTxnOps()
	for _, m := range ms {
		// At most one transaction a batch, plus a few for claims that
		// raced another member's: never one a site.
		if limit := count[m.id]/batch + 8; txns[m.id] > limit {
			t.Errorf("%s claimed %d sites in %d transactions; want at most %d (batches of %d)", m.id, count[m.id], txns[m.id], limit, batch)
		}
	}
	// What a shard owns, it probes.
	ctx := etcdCtx(t)
	if r := ms[0].eng.RunRound(ctx); r.Discarded || r.Probed == 0 {
		t.Fatalf("cp-a's round after the cold start: probed %d, discarded %v", r.Probed, r.Discarded)
	}

	// Kill cp-b as etcd sees it: its client dies, its lease is not
	// revoked and expires after lease_ttl.
	lost := count["cp-b"]
	killed := time.Now()
	if err := ms[1].cli.Close(); err != nil {
		t.Fatal(err)
	}
	live := []*member{ms[0], ms[2]}
	waitFor(t, "two shards owning every site after cp-b was killed", 60*time.Second, func() bool {
		var ok bool
		count, ok = shares(live)
		return ok
	})
	t.Logf("figure: takeover of a killed shard's %d sites: every site owned again after %s (lease_ttl %s): %v",
		lost, time.Since(killed).Round(time.Millisecond), testTTL, count)
	after, _ := ownerRevisions(t, ms[0].cli)
	for s, o := range owner {
		if o != "cp-b" && after[s] != o {
			t.Errorf("site %s moved from %s to %s though its owner lived", s, o, after[s])
		}
		if after[s] == "cp-b" || after[s] == "" {
			t.Errorf("site %s: owner %q after cp-b's lease expired", s, after[s])
		}
	}
}
