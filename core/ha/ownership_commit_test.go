package ha

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// heldCommit is an engine commit hook that, once armed, holds the next
// commit (the engine's lock held with it) until released.
type heldCommit struct {
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (h *heldCommit) arm() {
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
}

func (h *heldCommit) hook() {
	h.mu.Lock()
	armed := h.armed
	h.armed = false
	h.mu.Unlock()
	if armed {
		close(h.entered)
		<-h.release
	}
}

// startHooked is startMember in sharded mode with the engine's commit
// hooks set.
func startHooked(t *testing.T, srv *etcdtest.Server, id, cfgText string, hooks *engine.Hooks) *member {
	t.Helper()
	cli := srv.Client(t)
	api := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(api.Close)
	ec := &config.EtcdStore{Endpoints: []string{srv.Endpoint}, Prefix: testPrefix, LeaseTTL: testTTL, Mode: config.ModeSharded, ID: id, Advertise: api.URL}
	st := etcdstore.New(cli, etcdstore.Options{Prefix: testPrefix, Timeout: time.Minute})
	node := New(Options{Client: cli, Store: st, Config: ec, ID: id, URL: api.URL})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eng, diags := engine.New(ctx, enginetest.Config(t, cfgText), engine.Options{
		Store: st, NewSource: enginetest.Sources{}.Factory(), Hooks: hooks,
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
	return m
}

// TestClaimWhileACommitIsHeld: two shards on a real etcd; cp-a's round is
// committing (its commit held by a hook, the engine's lock with it) when
// cp-b dies. cp-a claims cp-b's sites and owns every site before that
// commit is let go: a claim does not wait for a committing round (before,
// it waited for the engine's lock). Once the commit ends, the held round
// is saved, and cp-a's takeover round probes the claimed sites, and only
// them, as stored; its next round probes every site. The waits only catch
// a hang.
func TestClaimWhileACommitIsHeld(t *testing.T) {
	srv := etcdtest.Start(t) // etcd at its defaults: --max-txn-ops 128
	const sites = 300
	cfg := sitesEveryRound(sites)
	held := &heldCommit{entered: make(chan struct{}), release: make(chan struct{})}
	a := startHooked(t, srv, "cp-a", cfg, &engine.Hooks{BeforeCommit: held.hook})
	b := startMember(t, srv, "cp-b", config.ModeSharded, cfg)
	var count map[string]int
	waitFor(t, "two shards owning every site as Assign says", time.Minute, func() bool {
		var ok bool
		count, ok = atShares(t, []*member{a, b}, sites)
		return ok
	})
	ctx := etcdCtx(t)
	for _, m := range []*member{a, b} {
		if res := m.eng.RunRound(ctx); res.Probed != count[m.id] {
			t.Fatalf("%s's round probed %d of its %d sites", m.id, res.Probed, count[m.id])
		}
	}
	lost := count["cp-b"]

	held.arm()
	roundDone := make(chan engine.RoundResult, 1)
	go func() { roundDone <- a.eng.RunRound(context.Background()) }()
	select {
	case <-held.entered:
	case <-time.After(time.Minute):
		t.Fatal("cp-a's round never reached its commit")
	}
	// Kill cp-b as etcd sees it: its client dies, its lease expires.
	if err := b.cli.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "cp-a owning every site while its commit is held", time.Minute, func() bool {
		_, ok := atShares(t, []*member{a}, sites)
		return ok
	})
	select {
	case res := <-roundDone:
		t.Fatalf("cp-a's round ended (%+v) though its commit is held", res)
	default:
	}
	close(held.release)
	var res engine.RoundResult
	select {
	case res = <-roundDone:
	case <-time.After(time.Minute):
		t.Fatal("cp-a's round did not end after its commit was let go")
	}
	if res.Discarded || res.Probed != count["cp-a"] {
		t.Fatalf("cp-a's held round: %+v; want its own %d sites probed, not discarded", res, count["cp-a"])
	}

	// The early round: the claimed sites, and only them.
	res = a.eng.RunTakeover(ctx)
	if !res.Takeover || res.Discarded || res.Probed != lost || res.Claimed != lost {
		t.Fatalf("cp-a's takeover round: %+v; want the %d sites claimed from cp-b probed", res, lost)
	}
	if again := a.eng.RunTakeover(ctx); again.Probed != 0 {
		t.Fatalf("a second takeover round probed %d sites; want none (each claimed site is probed early once)", again.Probed)
	}
	for _, s := range a.node.Info().Owned {
		if st := a.eng.Views().Site(s).Origins["a"].State; st != "healthy" {
			t.Fatalf("site %s origin a %s after the takeover; want healthy, as stored", s, st)
		}
	}
	if res := a.eng.RunRound(ctx); res.Discarded || res.Probed != sites {
		t.Fatalf("cp-a's round after the takeover: %+v; want all %d sites probed", res, sites)
	}
}
