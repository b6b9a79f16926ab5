package ha

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// readCounter wraps an etcd client's KV and counts what its owner reads
// of the site records (P/sites/, keys-only reads aside): the reads of the
// whole sites prefix (fullReads: a full reload), the records returned to
// reads of what changed since a revision (changed: following the others'
// commits), and those returned to any other read (records: named sites).
type readCounter struct {
	clientv3.KV
	prefix string // P/sites/

	records   atomic.Int64
	changed   atomic.Int64
	fullReads atomic.Int64
}

// add counts the site records r returned to op.
func (c *readCounter) add(op clientv3.Op, r *clientv3.GetResponse) {
	if !op.IsGet() || op.IsKeysOnly() {
		return // not a record
	}
	n := int64(0)
	for _, kv := range r.Kvs {
		if strings.HasPrefix(string(kv.Key), c.prefix) {
			n++
		}
	}
	switch {
	case op.MinModRev() > 0:
		c.changed.Add(n)
	case string(op.KeyBytes()) == c.prefix && string(op.RangeBytes()) == clientv3.GetPrefixRangeEnd(c.prefix):
		c.fullReads.Add(1)
	default:
		c.records.Add(n)
	}
}

func (c *readCounter) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := c.KV.Get(ctx, key, opts...)
	if err == nil {
		c.add(clientv3.OpGet(key, opts...), resp)
	}
	return resp, err
}

func (c *readCounter) Txn(ctx context.Context) clientv3.Txn {
	return &countedTxn{Txn: c.KV.Txn(ctx), c: c}
}

// reset zeroes the counts.
func (c *readCounter) reset() {
	c.records.Store(0)
	c.changed.Store(0)
	c.fullReads.Store(0)
}

type countedTxn struct {
	clientv3.Txn
	c                *readCounter
	thenOps, elseOps []clientv3.Op
}

func (t *countedTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }

func (t *countedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.thenOps = append(t.thenOps, ops...)
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *countedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.elseOps = append(t.elseOps, ops...)
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *countedTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	if err != nil {
		return resp, err
	}
	ops := t.thenOps
	if !resp.Succeeded {
		ops = t.elseOps
	}
	for i, r := range resp.Responses {
		if rr := r.GetResponseRange(); rr != nil && i < len(ops) {
			t.c.add(ops[i], (*clientv3.GetResponse)(rr))
		}
	}
	return resp, err
}

// startCounted is startMember on an etcd client whose reads are counted.
func startCounted(t *testing.T, srv *etcdtest.Server, id, cfgText string, newSource func(*config.Source, string, hclog.Logger) engine.VoteSource) (*member, *readCounter) {
	t.Helper()
	cli := srv.Client(t)
	rc := &readCounter{KV: cli.KV, prefix: testPrefix + "/sites/"}
	cli.KV = rc
	api := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(api.Close)
	ec := &config.EtcdStore{Endpoints: []string{srv.Endpoint}, Prefix: testPrefix, LeaseTTL: testTTL, Mode: config.ModeSharded, ID: id, Advertise: api.URL}
	st := etcdstore.New(cli, etcdstore.Options{Prefix: testPrefix, Timeout: testTTL})
	node := New(Options{Client: cli, Store: st, Config: ec, ID: id, URL: api.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eng, diags := engine.New(ctx, enginetest.Config(t, cfgText), engine.Options{
		Store: st, NewSource: newSource,
		Active: node.Active, Owns: node.Owns(), OnCommitError: node.OnCommitError,
	})
	if diags.HasErrors() {
		t.Fatalf("engine of %s: %s", id, diags.Error())
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	done := node.Start(runCtx, eng)
	m := &member{id: id, url: api.URL, node: node, eng: eng, st: st, cli: cli, done: done}
	m.stop = sync.OnceFunc(func() {
		stopRun()
		select {
		case <-done:
		case <-time.After(3 * testTTL):
			t.Errorf("%s did not end its term within %s", id, 3*testTTL)
		}
		eng.Close()
	})
	t.Cleanup(m.stop)
	return m, rc
}

// sitesEveryRound is manySites(n) with sites_per_round n: a round
// probes every site its instance owns.
func sitesEveryRound(n int) string {
	return strings.Replace(manySites(n), "round_interval = \"200ms\"\n", fmt.Sprintf("round_interval = \"200ms\"\n  sites_per_round = %d\n", n), 1)
}

// atShares reports whether live own every one of sites exactly once,
// each site by the member Assign names, every member acting with the
// others listed; and how many each owns.
func atShares(t *testing.T, live []*member, sites int) (map[string]int, bool) {
	t.Helper()
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

// TestShardTakeoverReadsWhatItClaims: three shards on a real etcd at its
// defaults, with a round probing every owned site and sources that take
// 100 ms to vote (so rounds are in flight while claims land). What bounds
// a cold start and a takeover to about the lease plus one round, as
// structure rather than time:
//
//   - a cold start reads the whole store at most twice a member (the
//     engine's start and the first reload of the others' commits), however
//     many sites it claims and hands over;
//   - a takeover reads none of it whole: each survivor reads about the
//     records of the sites it claimed (LoadSites), not the 3 x 300;
//   - no round the survivors run while the claims land is discarded,
//     whether the claimed sites have a stored state or none yet (then
//     they start as new sites, in place), and their next round probes
//     every site they own, the claimed ones included.
//
// The waits only catch a hang.
func TestShardTakeoverReadsWhatItClaims(t *testing.T) {
	for _, tt := range []struct {
		name string
		// stored: rounds ran before the kill, so every site has a
		// stored (healthy) state; otherwise none has a record yet.
		stored bool
	}{
		{"stored state", true},
		{"nothing stored yet", false},
	} {
		t.Run(tt.name, func(t *testing.T) { shardTakeover(t, tt.stored) })
	}
}

func shardTakeover(t *testing.T, stored bool) {
	srv := etcdtest.Start(t) // etcd at its defaults: --max-txn-ops 128
	const sites = 900
	cfg := sitesEveryRound(sites)
	slow := func(c *config.Source, _ string, _ hclog.Logger) engine.VoteSource {
		return slowSource{Source: enginetest.NewSource(c.Name), delay: 100 * time.Millisecond}
	}
	ids := []string{"cp-a", "cp-b", "cp-c"}
	ms := make([]*member, len(ids))
	rcs := make([]*readCounter, len(ids))
	for i, id := range ids {
		ms[i], rcs[i] = startCounted(t, srv, id, cfg, slow)
	}
	var count map[string]int
	waitFor(t, "three shards owning every site as Assign says", 60*time.Second, func() bool {
		var ok bool
		count, ok = atShares(t, ms, sites)
		return ok
	})
	for i, rc := range rcs {
		if n := rc.fullReads.Load(); n > 2 {
			t.Errorf("%s read every site record %d times during the cold start; want at most 2 (its start and its first reload of the others' commits)", ids[i], n)
		}
	}
	if stored {
		// Rounds until every site is stored healthy: what the survivors
		// then take over is state, not fresh sites. A commit may fail on
		// a loaded machine (it is retried with the next): rounds go on
		// until each member saved two in a row.
		saved := make([]int, len(ms))
		for r := 0; ; r++ {
			done := true
			for i, m := range ms {
				res := m.eng.RunRound(context.Background())
				if res.Discarded || res.Probed != count[ids[i]] {
					t.Fatalf("round %d of %s: probed %d of its %d sites, discarded %v", r+1, ids[i], res.Probed, count[ids[i]], res.Discarded)
				}
				if saved[i]++; !res.Saved {
					saved[i] = 0
				}
				done = done && saved[i] >= 2
			}
			if done {
				break
			}
			if r == 20 {
				t.Fatalf("20 rounds of each member and not two saved in a row on every one: %v", saved)
			}
		}
		waitFor(t, "cp-a's view of cp-b's sites healthy", 20*time.Second, func() bool {
			for _, s := range ms[1].node.Info().Owned {
				if ms[0].eng.Views().Site(s).Origins["a"].State != "healthy" {
					return false
				}
			}
			return true
		})
	}

	// Kill cp-b as etcd sees it: its client dies, its lease expires.
	for _, rc := range rcs {
		rc.reset()
	}
	lost := count["cp-b"]
	before := count
	// A member that has not followed a commit of the others yet (none
	// was made when nothing is stored) reads everything once when it
	// first does: that is its first reload, not the takeover's.
	firstReload := make([]int64, len(ms))
	for i, m := range ms {
		if m.node.reloads.Load() == 0 {
			firstReload[i] = 1
		}
	}
	if err := ms[1].cli.Close(); err != nil {
		t.Fatal(err)
	}
	live := []*member{ms[0], ms[2]}
	liveRC := []*readCounter{rcs[0], rcs[2]}
	liveFirst := []int64{firstReload[0], firstReload[2]}
	// The survivors run rounds back to back while the claims land: the
	// reloads of claimed sites leave a round in progress alone.
	stopRounds := make(chan struct{})
	var rounds sync.WaitGroup
	var ran, discarded atomic.Int64
	for _, m := range live {
		rounds.Go(func() {
			for {
				select {
				case <-stopRounds:
					return
				default:
				}
				res := m.eng.RunRound(context.Background())
				ran.Add(1)
				if res.Discarded {
					discarded.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	waitFor(t, "two shards owning every site after cp-b was killed", 60*time.Second, func() bool {
		var ok bool
		count, ok = atShares(t, live, sites)
		return ok
	})
	close(stopRounds)
	rounds.Wait()
	if n := discarded.Load(); n != 0 {
		t.Errorf("%d of the survivors' %d rounds during the takeover were discarded; want none", n, ran.Load())
	}
	batch := ms[0].st.MaxTxnOps()
	for i, m := range live {
		claimed := count[m.id] - before[m.id]
		if claimed <= 0 {
			t.Fatalf("%s claimed %d of cp-b's %d sites", m.id, claimed, lost)
		}
		rc := liveRC[i]
		if n := rc.fullReads.Load(); n > liveFirst[i] {
			t.Errorf("%s read every site record %d times during the takeover; want %d (its first reload of the others' commits)", m.id, n, liveFirst[i])
		}
		// Each claimed site's record once, with room for one reload
		// retried: never the other shards' records. (Following the other
		// survivor's commits reads what they wrote: counted apart.)
		if n, most := rc.records.Load(), int64(claimed+batch); n > most {
			t.Errorf("%s read %d site records to take over %d sites; want at most %d (the claimed ones, not the %d of the store)", m.id, n, claimed, most, sites)
		}
		t.Logf("%s claimed %d of cp-b's %d sites reading %d site records, and %d following the other's commits (%d in the store)",
			m.id, claimed, lost, rc.records.Load(), rc.changed.Load(), sites)
	}
	// The very next round probes every owned site, the claimed ones
	// included, and keeps their stored state: they were healthy.
	for i, m := range live {
		res := m.eng.RunRound(context.Background())
		if res.Discarded || res.Probed != count[m.id] {
			t.Errorf("%s's first round after the takeover: probed %d of its %d sites (%d claimed), discarded %v",
				m.id, res.Probed, count[m.id], count[m.id]-before[m.id], res.Discarded)
		}
		if !stored {
			continue
		}
		for _, s := range m.node.Info().Owned {
			if st := m.eng.Views().Site(s).Origins["a"].State; st != "healthy" {
				t.Errorf("%s: site %s origin a %s after the takeover; want healthy, as stored", live[i].id, s, st)
				break
			}
		}
	}
}
