package ha

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/store/etcd/etcdtest"
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
