package ha

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// fleetSites is a configuration of n sites, each with two level-1
// origins and one level-2 origin.
//
// The tests run the rounds themselves (RunRound): round_interval only sets
// the source's deadline, 10s so that a loaded machine (-race, 900 targets)
// does not lose a round's votes to it, which would hold a failover back a
// round that the test counts.
func fleetSites(n int) string {
	var b strings.Builder
	b.WriteString("control {\n  round_interval = \"10s\"\n}\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n")
	for i := range n {
		fmt.Fprintf(&b, `site "f%03d" {
  hostname = "f%03d.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`, i, i)
	}
	return b.String()
}

// fleetMember is an instance whose rounds the test runs (RunRound), with
// its log kept.
type fleetMember struct {
	id   string
	node *Node
	eng  *engine.Engine
	st   *etcdstore.Store
	logs *sdktest.LogBuffer
	stop func()
}

func startFleetMember(t *testing.T, srv *etcdtest.Server, id, cfgText string, sources enginetest.Sources) *fleetMember {
	t.Helper()
	return startFleetMemberIn(t, srv, id, config.ModeActiveStandby, cfgText, sources)
}

func startFleetMemberIn(t *testing.T, srv *etcdtest.Server, id, mode, cfgText string, sources enginetest.Sources) *fleetMember {
	t.Helper()
	cli := srv.Client(t)
	logs := &sdktest.LogBuffer{}
	log := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	ec := &config.EtcdStore{Endpoints: []string{srv.Endpoint}, Prefix: testPrefix, LeaseTTL: testTTL, Mode: mode, ID: id, Advertise: "http://" + id,
		MaxTxnOps: config.DefaultEtcdMaxTxnOps}
	st := etcdstore.New(cli, etcdstore.Options{Prefix: testPrefix, Timeout: 4 * testTTL, MaxTxnOps: ec.MaxTxnOps})
	node := New(Options{Client: cli, Store: st, Config: ec, ID: id, URL: ec.Advertise, Logger: log})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eng, diags := engine.New(ctx, enginetest.Config(t, cfgText), engine.Options{
		Store: st, NewSource: sources.Factory(), Logger: log,
		Active: node.Active, Owns: node.Owns(), OnCommitError: node.OnCommitError,
	})
	if diags.HasErrors() {
		t.Fatalf("engine of %s: %s", id, diags.Error())
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	done := node.Start(runCtx, eng)
	m := &fleetMember{id: id, node: node, eng: eng, st: st, logs: logs}
	m.stop = sync.OnceFunc(func() {
		stopRun()
		select {
		case <-done:
		case <-time.After(stopHang):
			t.Errorf("%s did not stop in %s", id, stopHang)
		}
		eng.Close()
	})
	t.Cleanup(m.stop)
	return m
}

// levels counts the sites of v at each level.
func levels(v *engine.Views) map[int]int {
	out := map[int]int{}
	for _, name := range v.Names() {
		out[v.Site(name).Level]++
	}
	return out
}

// TestFleetFailsOverUnderHA: a leader and a standby on etcd at its
// defaults (--max-txn-ops 128), 300 sites of three origins. The first
// rounds save the whole fleet healthy, then every level-1 origin fails
// and all 300 sites fail over in one round: each of those commits is
// split (about 1,200 writes in the incident round), the standby shows
// each committed round whole, and after the leader stops, the standby
// takes over with every site on level 2 and a journal without gaps.
func TestFleetFailsOverUnderHA(t *testing.T) {
	const sites = 300
	srv := etcdtest.Start(t) // no --max-txn-ops: etcd's default 128
	sources := enginetest.Sources{"direct": enginetest.NewSource("direct")}
	cfg := fleetSites(sites)
	a := startFleetMember(t, srv, "cp-a", cfg, sources)
	b := startFleetMember(t, srv, "cp-b", cfg, sources)
	var leader, standby *fleetMember
	waitFor(t, "a leader", 20*time.Second, func() bool {
		switch {
		case a.node.Active():
			leader, standby = a, b
		case b.node.Active():
			leader, standby = b, a
		default:
			return false
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(what string) engine.RoundResult {
		t.Helper()
		res := leader.eng.RunRound(ctx)
		if !res.Saved {
			t.Fatalf("%s: round %d not saved: %s", what, res.Round, leader.logs.String())
		}
		return res
	}
	// healthy_threshold 2: two rounds make every origin healthy.
	run("first round")
	res := run("second round")
	if res.Events < sites*3 {
		t.Fatalf("the second round made %d events, want at least %d (every origin healthy)", res.Events, sites*3)
	}
	healthy := func(v *engine.Views) int {
		n := 0
		for _, name := range v.Names() {
			for _, o := range v.Site(name).Origins {
				if o.State == "healthy" {
					n++
				}
			}
		}
		return n
	}
	waitFor(t, "the standby to show every origin healthy", 10*testTTL, func() bool {
		return healthy(standby.eng.Views()) == sites*3
	})

	for i := range sites {
		for _, o := range []string{"a1", "a2"} {
			sources["direct"].SetDown(fmt.Sprintf("f%03d", i), o, true)
		}
	}
	// unhealthy_threshold 3: the third round fails every site over.
	for i := range 3 {
		run(fmt.Sprintf("incident round %d", i+1))
		if got := levels(leader.eng.Views()); i < 2 && got[1] != sites {
			t.Fatalf("after incident round %d: levels %v, want all on 1", i+1, got)
		}
	}
	if got := levels(leader.eng.Views()); got[2] != sites {
		t.Fatalf("the leader shows levels %v, want all %d sites on 2", got, sites)
	}
	waitFor(t, "the standby to show every site on level 2", 10*testTTL, func() bool {
		return levels(standby.eng.Views())[2] == sites
	})
	if lv, sv := leader.eng.Views().Publication, standby.eng.Views().Publication; lv != sv {
		t.Errorf("publication: leader %d, standby %d", lv, sv)
	}

	leader.stop()
	waitFor(t, "the standby to take over", 10*testTTL, standby.node.Active)
	if got := levels(standby.eng.Views()); got[2] != sites {
		t.Fatalf("the new leader shows levels %v after its reload, want all %d sites on 2", got, sites)
	}
	evs, err := standby.st.Events(ctx, 0, "", 100000)
	if err != nil {
		t.Fatal(err)
	}
	switched := 0
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: the journal has a gap or a duplicate", i, e.Seq)
		}
		if e.Event.Kind == decide.KindLevelSwitched {
			switched++
		}
	}
	if switched != sites {
		t.Fatalf("the journal holds %d level switches, want %d", switched, sites)
	}
	if res := standby.eng.RunRound(ctx); !res.Saved {
		t.Fatalf("the new leader's first round was not saved: %s", standby.logs.String())
	}
}

// TestMaxTxnOpsAboveEtcds: max_txn_ops (128) above what etcd takes (40):
// the node finds etcd's limit when it joins, says so in its log, and the
// fleet's commits are split by it.
func TestMaxTxnOpsAboveEtcds(t *testing.T) {
	srv := etcdtest.Start(t, "--max-txn-ops", "40")
	sources := enginetest.Sources{"direct": enginetest.NewSource("direct")}
	m := startFleetMember(t, srv, "cp-a", fleetSites(60), sources)
	waitFor(t, "the leader", 20*time.Second, m.node.Active)
	if got := m.st.MaxTxnOps(); got != 40 {
		t.Fatalf("the store splits by %d, want etcd's 40", got)
	}
	if log := m.logs.String(); !strings.Contains(log, "etcd takes fewer operations per transaction") || !strings.Contains(log, "etcd_takes=40") {
		t.Fatalf("no warning naming etcd's limit in the log:\n%s", log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 {
		if res := m.eng.RunRound(ctx); !res.Saved {
			t.Fatalf("round %d not saved: %s", res.Round, m.logs.String())
		}
	}
	st, err := m.st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Sites) != 60 || st.Meta.Round != 2 {
		t.Fatalf("%d sites saved at round %d, want 60 at round 2", len(st.Sites), st.Meta.Round)
	}
}

// TestShardedFleetFailsOver: two shards on etcd at its defaults share 300
// sites; every level-1 origin fails and each shard fails its share over
// in one round, a split commit guarded by its sites' owner keys. Both
// shards end up showing every site on level 2, and the shared journal
// holds each switch once, without gaps.
func TestShardedFleetFailsOver(t *testing.T) {
	const sites = 300
	srv := etcdtest.Start(t)
	sources := enginetest.Sources{"direct": enginetest.NewSource("direct")}
	cfg := fleetSites(sites)
	ms := []*fleetMember{
		startFleetMemberIn(t, srv, "cp-a", config.ModeSharded, cfg, sources),
		startFleetMemberIn(t, srv, "cp-b", config.ModeSharded, cfg, sources),
	}
	waitFor(t, "two shards owning every site", 20*time.Second, func() bool {
		a, b := ms[0].node.Info(), ms[1].node.Info()
		return a.OwnedSites > 0 && b.OwnedSites > 0 && a.OwnedSites+b.OwnedSites == sites
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rounds := func(n int) {
		t.Helper()
		for range n {
			for _, m := range ms {
				if res := m.eng.RunRound(ctx); !res.Saved && !res.Discarded {
					t.Fatalf("%s: round %d not saved: %s", m.id, res.Round, m.logs.String())
				}
			}
		}
	}
	rounds(2)
	for i := range sites {
		for _, o := range []string{"a1", "a2"} {
			sources["direct"].SetDown(fmt.Sprintf("f%03d", i), o, true)
		}
	}
	rounds(3)
	for _, m := range ms {
		waitFor(t, m.id+" to show every site on level 2", 10*testTTL, func() bool {
			return levels(m.eng.Views())[2] == sites
		})
	}
	evs, err := ms[0].st.Events(ctx, 0, "", 100000)
	if err != nil {
		t.Fatal(err)
	}
	switched := map[string]int{}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: the journal has a gap or a duplicate", i, e.Seq)
		}
		if e.Event.Kind == decide.KindLevelSwitched {
			switched[e.Site]++
		}
	}
	if len(switched) != sites {
		t.Fatalf("%d sites switched in the journal, want %d", len(switched), sites)
	}
	for site, n := range switched {
		if n != 1 {
			t.Fatalf("site %s switched %d times in the journal, want once", site, n)
		}
	}
}
