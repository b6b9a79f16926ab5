package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// testTTL is the shortest lease etcd grants in whole seconds that vigil
// accepts: every wait below is a few of them.
const testTTL = 2 * time.Second

const testPrefix = "/ha-test"

const oneSite = `
control {
  round_interval = "200ms"
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}
`

func manySites(n int) string {
	var b strings.Builder
	b.WriteString("control {\n  round_interval = \"200ms\"\n}\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n")
	for i := range n {
		fmt.Fprintf(&b, "site \"s%02d\" {\n  hostname = \"s%02d.example.com\"\n  origin \"a\" { address = \"http://127.0.0.1:18001\" }\n  origin \"b\" { address = \"http://127.0.0.1:18002\" }\n}\n", i, i)
	}
	return b.String()
}

// member is one instance: a node, its engine on the etcd store, and its
// API (the node's Handler in front of a handler that answers 200).
type member struct {
	id   string
	url  string
	node *Node
	eng  *engine.Engine
	st   *etcdstore.Store
	cli  *clientv3.Client
	stop func()
	// done is closed when the node has stopped (Start's channel).
	done <-chan struct{}
}

func startMember(t *testing.T, srv *etcdtest.Server, id, mode, cfgText string) *member {
	t.Helper()
	return startMemberWith(t, srv, id, mode, cfgText, enginetest.Sources{}.Factory())
}

// startMemberWith is startMember with the engine's sources made by newSource.
func startMemberWith(t *testing.T, srv *etcdtest.Server, id, mode, cfgText string, newSource func(*config.Source, string, hclog.Logger) engine.VoteSource) *member {
	t.Helper()
	return startMemberConfig(t, srv, id, mode, cfgText, newSource, nil)
}

// startMemberConfig is startMemberWith with the store block changed by
// edit (nil: as the other tests have it).
func startMemberConfig(t *testing.T, srv *etcdtest.Server, id, mode, cfgText string, newSource func(*config.Source, string, hclog.Logger) engine.VoteSource, edit func(*config.EtcdStore)) *member {
	t.Helper()
	cli := srv.Client(t)
	var handler http.Handler = http.NotFoundHandler()
	var hmu sync.Mutex
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hmu.Lock()
		h := handler
		hmu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)
	ec := &config.EtcdStore{Endpoints: []string{srv.Endpoint}, Prefix: testPrefix, LeaseTTL: testTTL, Mode: mode, ID: id, Advertise: api.URL}
	if edit != nil {
		edit(ec)
	}
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
	hmu.Lock()
	handler = node.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "passed to the API")
	}))
	hmu.Unlock()
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

// post sends a change to the member's API and returns the status and the
// error message and hint of a 421.
func (m *member) post(t *testing.T, path string) (status int, msg, hint string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post(m.url+path, "application/json", strings.NewReader(`{"level": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code, Message, Hint string } `json:"error"`
	}
	if resp.StatusCode == http.StatusMisdirectedRequest {
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Code != "not_leader" {
			t.Fatalf("421 body %s: want {\"error\":{\"code\":\"not_leader\",...}}", b)
		}
	}
	return resp.StatusCode, e.Error.Message, e.Error.Hint
}

// cluster reads GET /v1/cluster through the API, as a client does.
func (m *member) cluster(t *testing.T) Info {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(m.url + "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info Info
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	return info
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settled waits for one acting leader among ms, every other instance a
// standby confirming it, and returns the leader.
func settled(t *testing.T, ms []*member, timeout time.Duration) *member {
	t.Helper()
	var leader *member
	waitFor(t, "one leader, confirmed by every standby", timeout, func() bool {
		leader = nil
		for _, m := range ms {
			if info := m.node.Info(); info.Role == RoleLeader && info.Acting {
				if leader != nil {
					t.Fatalf("two leaders at once: %s and %s", leader.id, m.id)
				}
				leader = m
			}
		}
		if leader == nil {
			return false
		}
		for _, m := range ms {
			info := m.node.Info()
			if !info.Quorum || info.Leader == nil || info.Leader.ID != leader.id || !info.LeaderConfirmed {
				return false
			}
			if m != leader && (info.Role != RoleStandby || info.State != StateStandby || info.Acting) {
				return false
			}
		}
		return true
	})
	return leader
}

func others(ms []*member, not *member) []*member {
	var out []*member
	for _, m := range ms {
		if m != not {
			out = append(out, m)
		}
	}
	return out
}

// etcdCtx bounds a test's own call to etcd; it only catches a hang.
func etcdCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func storedMeta(t *testing.T, cli *clientv3.Client) store.Meta {
	t.Helper()
	resp, err := cli.Get(etcdCtx(t), testPrefix+"/meta")
	if err != nil {
		t.Fatal(err)
	}
	var m store.Meta
	if len(resp.Kvs) == 1 {
		if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// TestElection: three instances elect one leader; the standbys confirm
// it, refuse changes with 421 naming it with the CLI's flag, and the
// leader takes them. When the leader stops, another takes over within
// lease_ttl and the last standby names the new one.
func TestElection(t *testing.T) {
	srv := etcdtest.Start(t)
	var ms []*member
	for _, id := range []string{"cp-a", "cp-b", "cp-c"} {
		ms = append(ms, startMember(t, srv, id, config.ModeActiveStandby, oneSite))
	}
	leader := settled(t, ms, 10*time.Second)
	info := leader.cluster(t)
	if info.State != StateActing || !info.LeaderConfirmed || info.LeaderSeenAt == nil || info.EtcdSeenAt == nil || info.Etcd != "ok" {
		t.Fatalf("the leader's info: %+v", info)
	}
	if status, _, _ := leader.post(t, "/v1/sites/www/switch"); status != http.StatusOK {
		t.Fatalf("the leader answered a switch with %d; want it passed to the API", status)
	}
	standby := others(ms, leader)[0]
	status, msg, hint := standby.post(t, "/v1/sites/www/switch")
	if status != http.StatusMisdirectedRequest || msg != fmt.Sprintf("this instance is a standby; the leader is %s at %s", leader.id, leader.url) ||
		!strings.Contains(hint, "vigil switch -address "+leader.url+" www LEVEL") {
		t.Fatalf("a standby's answer to a switch: %d %q %q", status, msg, hint)
	}

	stopped := time.Now()
	leader.stop()
	rest := others(ms, leader)
	next := settled(t, rest, 3*testTTL)
	t.Logf("%s took over %s after %s stopped", next.id, time.Since(stopped).Round(time.Millisecond), leader.id)
	last := others(rest, next)[0]
	if _, msg, _ := last.post(t, "/v1/sites/www/switch"); !strings.Contains(msg, "the leader is "+next.id+" at "+next.url) {
		t.Fatalf("after the takeover the standby says %q; want it to name %s", msg, next.id)
	}
}

// TestFence: once etcd no longer has the leader's election key (as when
// it expires a lease the leader still believes alive), the fence's
// comparison fails in etcd itself, the old leader writes nothing and stops
// acting, and the other instance takes over. The old leader campaigns
// again: it leads once the new leader stops.
func TestFence(t *testing.T) {
	srv := etcdtest.Start(t)
	admin := srv.Client(t)
	ms := []*member{startMember(t, srv, "cp-a", config.ModeActiveStandby, oneSite), startMember(t, srv, "cp-b", config.ModeActiveStandby, oneSite)}
	leader := settled(t, ms, 10*time.Second)
	other := others(ms, leader)[0]
	ctx := etcdCtx(t)
	if res := leader.eng.RunRound(ctx); !res.Saved || res.Probed != 1 {
		t.Fatalf("the leader's round: %+v", res)
	}
	before := storedMeta(t, admin)
	cmps, ok := fence{leader.node}.Writer()
	if !ok || len(cmps) == 0 {
		t.Fatalf("the leader's fence: %v %v; want the comparison of its term", cmps, ok)
	}
	leader.node.mu.Lock()
	key := leader.node.leaderKey
	leader.node.mu.Unlock()
	if _, err := admin.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	// The comparison every write of the term carries now fails in etcd.
	probe, err := admin.Txn(ctx).If(cmps...).Then(clientv3.OpPut(testPrefix+"/fence-probe", "x")).Commit()
	if err != nil || probe.Succeeded {
		t.Fatalf("a write guarded by the old term's comparison: succeeded %v, %v; want it refused", probe != nil && probe.Succeeded, err)
	}
	// Whether the old leader noticed first (it follows the election) or
	// learns it from its commit, its round writes nothing.
	if res := leader.eng.RunRound(ctx); res.Probed > 0 && res.Saved {
		t.Fatalf("a round of a leader whose key is gone was saved: %+v", res)
	}
	if err := leader.st.Commit(ctx, store.Batch{Meta: store.Meta{Round: 99}, Sites: []store.Site{{Name: "www", Level: 2}}}); !errors.Is(err, etcdstore.ErrFenced) {
		t.Fatalf("a direct commit of the old leader returned %v, want ErrFenced", err)
	}
	if after := storedMeta(t, admin); after != before {
		t.Fatalf("the old leader wrote: meta %+v -> %+v", before, after)
	}
	if info := leader.node.Info(); info.Acting || info.Role == RoleLeader {
		t.Fatalf("the old leader says %+v; want it to have stopped acting", info)
	}

	if got := settled(t, ms, 3*testTTL); got != other {
		t.Fatalf("%s leads after %s's key went; want %s", got.id, leader.id, other.id)
	}
	if res := other.eng.RunRound(ctx); !res.Saved {
		t.Fatalf("the new leader's round: %+v", res)
	}
	other.stop()
	if got := settled(t, []*member{leader}, 3*testTTL); got != leader {
		t.Fatalf("the old leader did not lead again after the new one stopped")
	}
	if res := leader.eng.RunRound(etcdCtx(t)); !res.Saved {
		t.Fatalf("the round of the leader elected again: %+v", res)
	}
}

// TestNoQuorum: with etcd paused, no instance acts or names itself the
// leader; each shows the last leader seen, not confirmed, and how long
// ago, and its 421 says so. When etcd is back one leads again and the
// standby names it.
func TestNoQuorum(t *testing.T) {
	srv := etcdtest.Start(t)
	ms := []*member{startMember(t, srv, "cp-a", config.ModeActiveStandby, oneSite), startMember(t, srv, "cp-b", config.ModeActiveStandby, oneSite)}
	leader := settled(t, ms, 10*time.Second)
	standby := others(ms, leader)[0]
	if res := leader.eng.RunRound(etcdCtx(t)); !res.Saved {
		t.Fatalf("the leader's round: %+v", res)
	}

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = srv.Resume()
		}
	})
	waitFor(t, "both instances to see no quorum", 3*testTTL, func() bool {
		for _, m := range ms {
			if info := m.node.Info(); info.Quorum || info.Role != RoleDetached {
				return false
			}
		}
		return true
	})
	t.Logf("no quorum seen %s after etcd was paused", time.Since(paused).Round(time.Millisecond))
	for _, m := range ms {
		info := m.cluster(t)
		switch {
		case info.Acting, info.State != StateNoQuorum, info.Quorum:
			t.Errorf("%s while etcd is paused: acting %v, state %q, quorum %v; want not acting, \"no quorum\"", m.id, info.Acting, info.State, info.Quorum)
		case info.Leader == nil || info.Leader.ID != leader.id || info.LeaderConfirmed || info.LeaderSeenAt == nil:
			t.Errorf("%s while etcd is paused names leader %+v (confirmed %v, seen at %v); want %s, not confirmed", m.id, info.Leader, info.LeaderConfirmed, info.LeaderSeenAt, leader.id)
		case info.EtcdSeenAt == nil || info.EtcdAge() < testTTL || !strings.HasPrefix(info.Etcd, "unreachable"):
			t.Errorf("%s while etcd is paused: etcd %q, last answer %v ago", m.id, info.Etcd, info.EtcdAge())
		}
		if got := testutil.ToFloat64(m.node.metrics.quorum); got != 0 {
			t.Errorf("%s: vigil_cluster_etcd_quorum = %v while etcd is paused", m.id, got)
		}
	}
	status, msg, hint := leader.post(t, "/v1/sites/www/switch")
	wantMsg := fmt.Sprintf("no quorum: cannot confirm the leader; last seen %s (this instance) at %s ", leader.id, leader.url)
	if status != http.StatusMisdirectedRequest || !strings.HasPrefix(msg, wantMsg) || !strings.Contains(msg, " ago") ||
		strings.Contains(msg, "standby") || !strings.Contains(hint, "etcdctl endpoint health") {
		t.Errorf("the former leader's answer while etcd is paused: %d %q (hint %q); want it to start with %q", status, msg, hint, wantMsg)
	}
	status, msg, hint = standby.post(t, "/v1/sites/www/switch")
	wantMsg = fmt.Sprintf("no quorum: cannot confirm the leader; last seen %s at %s ", leader.id, leader.url)
	if status != http.StatusMisdirectedRequest || !strings.HasPrefix(msg, wantMsg) || !strings.Contains(hint, "vigil switch -address "+leader.url+" www LEVEL") {
		t.Errorf("the standby's answer while etcd is paused: %d %q (hint %q); want it to start with %q", status, msg, hint, wantMsg)
	}
	// Nothing is acted on or written while etcd is away: the engine
	// refuses, and the fence refuses before asking etcd.
	if _, err := leader.eng.Switch(etcdCtx(t), "www", 1, "test"); !errors.Is(err, engine.ErrNotActive) {
		t.Errorf("an action on the former leader returned %v, want ErrNotActive", err)
	}
	// "Before asking etcd" is shown by the error, not by a clock: a
	// commit that went to the paused etcd could only end with its
	// context's deadline, never with ErrFenced.
	if err := leader.st.Commit(etcdCtx(t), store.Batch{Meta: store.Meta{Round: 99}}); !errors.Is(err, etcdstore.ErrFenced) {
		t.Errorf("a commit of the former leader returned %v, want ErrFenced before asking etcd", err)
	}

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	next := settled(t, ms, 10*testTTL)
	t.Logf("%s leads %s after etcd was resumed", next.id, time.Since(paused).Round(time.Millisecond))
	for _, m := range ms {
		if info := m.cluster(t); !info.Quorum || info.Etcd != "ok" {
			t.Errorf("%s after etcd is back: quorum %v, etcd %q", m.id, info.Quorum, info.Etcd)
		}
	}
	if _, msg, _ := others(ms, next)[0].post(t, "/v1/sites/www/switch"); msg != fmt.Sprintf("this instance is a standby; the leader is %s at %s", next.id, next.url) {
		t.Errorf("the standby after etcd is back says %q", msg)
	}
	if res := next.eng.RunRound(etcdCtx(t)); !res.Saved {
		t.Errorf("the leader's round after etcd is back: %+v", res)
	}
}

// TestShardedNoQuorum: two shards split the sites; with etcd paused both
// are detached, own nothing, and the 421 names the owner by the members
// last seen, not confirmed; when etcd is back the shares return.
func TestShardedNoQuorum(t *testing.T) {
	srv := etcdtest.Start(t)
	const sites = 20
	cfg := manySites(sites)
	ms := []*member{startMember(t, srv, "cp-a", config.ModeSharded, cfg), startMember(t, srv, "cp-b", config.ModeSharded, cfg)}
	shares := func() (map[string]string, bool) {
		owner := map[string]string{}
		for _, m := range ms {
			info := m.node.Info()
			if info.Role != RoleShard || !info.Acting || len(info.Members) != len(ms) || len(info.Owned) == 0 {
				return nil, false
			}
			for _, s := range info.Owned {
				if prev, dup := owner[s]; dup {
					t.Fatalf("site %s owned by %s and %s at once", s, prev, info.ID)
				}
				owner[s] = info.ID
			}
		}
		return owner, len(owner) == sites
	}
	waitFor(t, "two shards covering every site", 15*time.Second, func() bool { _, ok := shares(); return ok })
	owner, _ := shares()
	var mine, theirs string // sites of cp-a and of cp-b
	for s, id := range owner {
		if id == "cp-a" {
			mine = s
		} else {
			theirs = s
		}
	}

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = srv.Resume()
		}
	})
	waitFor(t, "both shards to be detached", 3*testTTL, func() bool {
		for _, m := range ms {
			if info := m.node.Info(); info.Quorum || info.Role != RoleDetached {
				return false
			}
		}
		return true
	})
	for _, m := range ms {
		if info := m.cluster(t); info.Acting || info.OwnedSites != 0 || len(info.Owned) != 0 || info.State != StateNoQuorum {
			t.Errorf("%s while etcd is paused: %+v; want detached, owning nothing", m.id, info)
		}
		if m.node.Owns()(mine) || m.node.Owns()(theirs) {
			t.Errorf("%s still probes sites while etcd is paused", m.id)
		}
	}
	a, b := ms[0], ms[1]
	if _, msg, hint := a.post(t, "/v1/sites/"+theirs+"/switch"); !strings.HasPrefix(msg, fmt.Sprintf("no quorum: cannot confirm the owner of site %s; by the members last seen it is cp-b at %s", theirs, b.url)) ||
		!strings.Contains(hint, "-address "+b.url) {
		t.Errorf("cp-a's answer for cp-b's site while etcd is paused: %q (hint %q)", msg, hint)
	}
	if _, msg, _ := a.post(t, "/v1/sites/"+mine+"/switch"); !strings.Contains(msg, "it is this instance, which does not act") {
		t.Errorf("cp-a's answer for its own site while etcd is paused: %q", msg)
	}

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	waitFor(t, "two shards covering every site again", 10*testTTL, func() bool { _, ok := shares(); return ok })
	if status, _, _ := a.post(t, "/v1/sites/"+a.node.Info().Owned[0]+"/switch"); status != http.StatusOK {
		t.Errorf("cp-a refused a change to a site it owns: %d", status)
	}
}

// TestStandbyFollowsCommitsOnly: a standby reloads when a commit lands
// (its counters, P/meta), not on other writes under the prefix: a split
// commit's staged writes and copies (core/store/etcdstore) come before and
// after its marker, and a reload on the staged ones would read nothing
// new, while one on a record written outside any commit (below) would
// show a round that is not committed.
func TestStandbyFollowsCommitsOnly(t *testing.T) {
	srv := etcdtest.Start(t)
	admin := srv.Client(t)
	ms := []*member{startMember(t, srv, "cp-a", config.ModeActiveStandby, oneSite), startMember(t, srv, "cp-b", config.ModeActiveStandby, oneSite)}
	leader := settled(t, ms, 10*time.Second)
	standby := others(ms, leader)[0]
	ctx := etcdCtx(t)
	for range 2 {
		if res := leader.eng.RunRound(ctx); !res.Saved {
			t.Fatalf("the leader's round: %+v", res)
		}
	}
	round := func() (uint64, uint64) {
		v := standby.eng.Views()
		return v.Round, v.Site("www").Round
	}
	waitFor(t, "the standby to show round 2", 3*testTTL, func() bool { r, s := round(); return r == 2 && s == 2 })
	reloads := standby.node.reloads.Load()

	// A record of round 3 lands ahead of its commit, outside any commit.
	resp, err := admin.Get(ctx, testPrefix+"/sites/www")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the stored record of www: %v %v", resp, err)
	}
	var rec store.Site
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		t.Fatal(err)
	}
	rec.LastProbed = 3
	b, _ := json.Marshal(rec)
	if _, err := admin.Put(ctx, testPrefix+"/sites/www", string(b)); err != nil {
		t.Fatal(err)
	}
	// A progress notice reaches the standby's watch after that write:
	// once it is handled, the standby has seen everything up to it.
	seen := standby.node.watched.Load()
	waitFor(t, "the standby's watch to pass the early write", 3*testTTL, func() bool {
		if err := standby.cli.RequestProgress(clientv3.WithRequireLeader(ctx)); err != nil {
			t.Fatal(err)
		}
		return standby.node.watched.Load() > seen
	})
	if n := standby.node.reloads.Load(); n != reloads {
		t.Errorf("the standby reloaded %d time(s) on a site record written ahead of its commit", n-reloads)
	}
	if r, s := round(); r != 2 || s != 2 {
		t.Errorf("the standby shows round %d, site round %d before round 3 is committed; want 2 and 2", r, s)
	}

	// The commit of round 3 lands: the standby shows it.
	if res := leader.eng.RunRound(ctx); !res.Saved || res.Round != 3 {
		t.Fatalf("the leader's round: %+v", res)
	}
	waitFor(t, "the standby to show round 3", 3*testTTL, func() bool { r, s := round(); return r == 3 && s == 3 })
}
