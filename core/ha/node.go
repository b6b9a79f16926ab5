package ha

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/store"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
)

// Roles of an instance: what it can prove it is now (package api
// defines them with Info).
const (
	RoleLeader   = api.RoleLeader
	RoleStandby  = api.RoleStandby
	RoleShard    = api.RoleShard
	RoleDetached = api.RoleDetached
)

// Options configure a Node.
type Options struct {
	Client *clientv3.Client
	Store  *etcdstore.Store
	Config *config.EtcdStore
	// ID names this instance; URL is its API as other instances give it.
	ID, URL string
	Logger  hclog.Logger
	// OnLead runs while this instance is the leader (active/standby) or
	// the notifier (sharded): it delivers notifications until ctx ends.
	OnLead func(ctx context.Context)
	// OnStoreChange is called after another instance wrote to the store
	// (the notifier's wake-up in sharded mode).
	OnStoreChange func()
}

// Member is one live instance of the cluster.
type Member = api.Member

// Node is this instance's place in the cluster. Its methods are safe for
// concurrent use.
type Node struct {
	opts    Options
	log     hclog.Logger
	cli     *clientv3.Client
	ttl     time.Duration
	sharded bool
	metrics *metrics

	// refreshMu serializes the reloads of the engine from the store, so
	// that an older snapshot is never installed over a newer one.
	refreshMu sync.Mutex
	// reloads counts the reloads of the state caused by the watch (tests).
	reloads atomic.Int64
	// partialReloads counts a shard's reloads of only what changed (tests).
	partialReloads atomic.Int64
	// seenRev is the etcd revision of a shard's last reload of the sites
	// it does not own (under refreshMu): the next reads what changed since.
	seenRev int64
	// watched counts the watch answers on the state that were handled
	// (tests).
	watched atomic.Int64
	// forcedStops counts the stops that hit StopTimeout.
	forcedStops atomic.Int64
	// limitChecked is set once etcd said how many operations it takes.
	limitChecked atomic.Bool
	// compactor compacts etcd's history when this instance's turn comes
	// (nil: compaction_interval is 0).
	compactor *etcdstore.Compactor

	mu          sync.Mutex
	eng         *engine.Engine
	lease       clientv3.LeaseID
	lastRenew   time.Time // last keep-alive answer of the current lease
	lastContact time.Time // last answer of etcd to any call of this node
	memberRev   int64     // create revision of our member key, 0 outside a term
	leading     bool      // we hold the election key of this term
	ready       bool      // leading and reloaded from the store
	leaderKey   string
	leaderRev   int64
	electedAt   time.Time // when Campaign returned: reads sent later see our key first while it exists
	// leader is the leader etcd last named (zero when it named none), and
	// leaderSeenAt when it did: a read that began then, or a keep-alive
	// of our own lease while we lead.
	leader       Member
	leaderSeenAt time.Time
	members      []Member
	held         map[string]int64   // sharded: owner keys we hold, by site
	owned        map[string]bool    // sharded: held and refreshed: we may write these
	releasing    map[string]bool    // sharded: owned, being handed over: not probed any more
	stale        []clientv3.LeaseID // leases of ended terms that etcd may still hold
	etcdOK       bool
	lastErr      string
	wake         chan struct{}      // sharded: reconcile now
	stopLeading  context.CancelFunc // ends the current leadership (nil when not leading)
}

// New prepares a node; Start begins its first term.
func New(opts Options) *Node {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	n := &Node{opts: opts, log: opts.Logger, cli: opts.Client, ttl: opts.Config.LeaseTTL,
		sharded: opts.Config.Mode == config.ModeSharded, held: map[string]int64{}, owned: map[string]bool{},
		releasing: map[string]bool{}, wake: make(chan struct{}, 1)}
	if opts.Config.CompactionInterval > 0 {
		n.compactor = opts.Store.Compactor()
	}
	n.metrics = newMetrics(n)
	opts.Store.SetFence(fence{n})
	return n
}

func (n *Node) key(parts ...string) string {
	return n.opts.Store.Prefix() + "/" + strings.Join(parts, "/")
}

// leaseValid reports whether the current lease is surely alive: answered
// within lease_ttl. Past that etcd may have expired it and handed our
// role to another instance, so we must not act, whatever we believe.
func (n *Node) leaseValid() bool {
	return n.memberRev != 0 && time.Since(n.lastRenew) < n.ttl
}

// quorum reports whether etcd answered this node within lease_ttl: an
// answer needs a quorum of etcd members (linearizable reads and lease
// renewals go through the raft leader). Called with n.mu held.
func (n *Node) quorum(now time.Time) bool {
	return !n.lastContact.IsZero() && now.Sub(n.lastContact) < n.ttl
}

// heard records an answer of etcd to a call sent at sent. Called with
// n.mu held.
func (n *Node) heard(sent time.Time) {
	if sent.After(n.lastContact) {
		n.lastContact = sent
	}
}

// Active is the engine's Options.Active: true while this instance may
// run rounds and actions.
func (n *Node) Active() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.leaseValid() {
		return false
	}
	return n.sharded || n.ready
}

// Owns is the engine's Options.Owns in sharded mode (nil otherwise).
func (n *Node) Owns() func(site string) bool {
	if !n.sharded {
		return nil
	}
	return func(site string) bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.owned[site] && !n.releasing[site] && n.leaseValid()
	}
}

// OnCommitError is the engine's Options.OnCommitError: a fenced commit
// means our role is over. Active/standby: the leader stops leading (it
// resigns and campaigns again, and reloads the state if it is elected).
// Sharded: the shard gives up its sites and reacquires them (reloading
// each) where it still may.
func (n *Node) OnCommitError(err error) {
	if !errors.Is(err, etcdstore.ErrFenced) {
		return
	}
	n.metrics.fenced.Inc()
	n.log.Error("a write was refused by the fence: this instance lost its role; it stops acting and reloads the stored state", "error", err)
	n.mu.Lock()
	if n.sharded {
		n.owned, n.releasing = map[string]bool{}, map[string]bool{}
	} else {
		n.deposeLocked()
	}
	n.mu.Unlock()
	n.kick()
	n.metrics.update()
}

// deposeLocked ends this instance's leadership now: it stops acting, and
// its campaign resigns and runs again. Called with n.mu held.
func (n *Node) deposeLocked() {
	n.leading, n.ready = false, false
	if n.stopLeading != nil {
		n.stopLeading()
	}
}

func (n *Node) kick() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// StopTimeout bounds a node's stop: the channel Start returns is closed
// at most this long after its context ends, whatever etcd does. A stop
// normally takes far less: every call to etcd of the node has a deadline
// or ends with the term's context, and the clean-up calls (resigning,
// revoking the lease) get one second each. Past StopTimeout the node
// stops waiting for its term, says so in the log, and counts it
// (ForcedStops); its caller then closes the etcd client, which ends
// whatever call was still waiting.
const StopTimeout = 5 * time.Second

// Start runs terms until ctx ends. eng must be built with Active, Owns
// and OnCommitError from this node. The channel it returns is closed once
// the node has given up its roles, at most StopTimeout after ctx ends.
func (n *Node) Start(ctx context.Context, eng *engine.Engine) <-chan struct{} {
	n.mu.Lock()
	n.eng = eng
	n.mu.Unlock()
	done := make(chan struct{})
	terms := make(chan struct{})
	go func() {
		defer close(terms)
		n.terms(ctx)
	}()
	go func() {
		defer close(done)
		select {
		case <-terms:
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(StopTimeout)
		defer t.Stop()
		select {
		case <-terms:
		case <-t.C:
			n.forcedStops.Add(1)
			n.log.Error("the cluster node did not give up its roles in time; stopping without waiting for etcd", "waited", StopTimeout)
		}
	}()
	go n.watchState(ctx)
	if n.compactor != nil {
		go n.compact(ctx)
	}
	return done
}

// compact compacts etcd's history every compaction_interval while this
// instance is active (the leader, or a shard): of the active instances
// one takes each interval's turn (etcdstore.Compactor), so a sharded
// cluster compacts once an interval, not once a shard.
func (n *Node) compact(ctx context.Context) {
	every := n.opts.Config.CompactionInterval
	n.compactor.Run(ctx, every, n.Active, func(err error) {
		n.log.Warn("cannot compact etcd's history; trying again next interval", "error", err, "compaction_interval", every)
	})
}

// ForcedStops counts the stops that did not end within StopTimeout (a
// stop that hung on etcd): zero unless something is wrong.
func (n *Node) ForcedStops() int64 { return n.forcedStops.Load() }

func (n *Node) setErr(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err == nil {
		n.etcdOK, n.lastErr = true, ""
		return
	}
	n.etcdOK, n.lastErr = false, err.Error()
}

// terms starts a term, waits for its lease to be lost, and starts again
// after a wait that doubles from 200ms up to lease_ttl (no jitter).
func (n *Node) terms(ctx context.Context) {
	b := &backoff.ExponentialBackOff{InitialInterval: 200 * time.Millisecond, Multiplier: 2, MaxInterval: n.ttl}
	for ctx.Err() == nil {
		err := n.term(ctx)
		if ctx.Err() != nil {
			return
		}
		next := b.NextBackOff()
		if err != nil {
			n.setErr(err)
			n.log.Error("etcd: cannot hold a lease; this instance does not act until it can", "error", err, "retry_in", next)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// term is one lease's life.
func (n *Node) term(parent context.Context) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	// The lease counts from when etcd granted it, which is after we asked:
	// by our clock it is valid until sent + lease_ttl at the latest.
	sent := time.Now()
	gctx, gcancel := context.WithTimeout(ctx, n.ttl)
	lease, err := n.cli.Grant(gctx, int64(n.ttl/time.Second))
	gcancel()
	if err != nil {
		return fmt.Errorf("granting a lease of %s: %w", n.ttl, err)
	}
	n.mu.Lock()
	n.heard(sent)
	n.mu.Unlock()
	n.revokeStale(ctx)
	ka, err := n.cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		n.addStale(lease.ID)
		return fmt.Errorf("keeping lease %x alive: %w", lease.ID, err)
	}
	pctx, pcancel := context.WithTimeout(ctx, n.ttl)
	put, err := n.cli.Put(pctx, n.key("members", n.opts.ID), n.opts.URL, clientv3.WithLease(lease.ID))
	pcancel()
	if err != nil {
		n.addStale(lease.ID)
		return fmt.Errorf("registering member %s: %w", n.opts.ID, err)
	}
	n.mu.Lock()
	n.lease, n.lastRenew, n.memberRev = lease.ID, sent, put.Header.Revision
	n.etcdOK, n.lastErr = true, ""
	n.mu.Unlock()
	n.log.Info("joined the cluster", "id", n.opts.ID, "mode", n.opts.Config.Mode, "lease_ttl", n.ttl)
	defer n.endTerm(lease.ID)
	n.checkLimit(ctx)

	// The election runs on a client whose own context is the term's:
	// concurrency.Election.Campaign, cancelled, resigns with its client's
	// context (Client.Ctx), which for the real client lasts until Close,
	// so that a stop while etcd is down would wait on it for good. This
	// one shares the real client's connection (KV, Watcher, Lease) and is
	// never closed itself: it ends with the term.
	ecli := clientv3.NewCtxClient(ctx)
	ecli.KV, ecli.Watcher, ecli.Lease = n.cli.KV, n.cli.Watcher, n.cli.Lease
	sess, err := concurrency.NewSession(ecli, concurrency.WithLease(lease.ID), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("etcd session: %w", err)
	}
	el := concurrency.NewElection(sess, n.key("leader"))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(3)
	go func() { defer wg.Done(); n.campaign(ctx, el) }()
	go func() { defer wg.Done(); n.followLeader(ctx) }()
	go func() { defer wg.Done(); n.watchMembers(ctx) }()
	if n.sharded {
		wg.Add(1)
		go func() { defer wg.Done(); n.ownership(ctx, lease.ID) }()
	}
	tick := time.NewTicker(n.ttl / 10)
	defer tick.Stop()
	for {
		select {
		case <-parent.Done():
			return nil
		case resp, ok := <-ka:
			if !ok {
				n.metrics.leaseLost.Inc()
				n.setErr(errors.New("the lease keep-alive ended: etcd unreachable or the lease expired"))
				n.log.Error("lost the etcd lease: this instance stops acting now and starts a new term", "id", n.opts.ID)
				return errors.New("the lease keep-alive ended (etcd unreachable, or the lease expired)")
			}
			if resp != nil {
				now := time.Now()
				n.mu.Lock()
				n.lastRenew = now
				n.heard(now)
				if n.leading {
					// Our election key lives on this lease: it still exists.
					n.leaderSeenAt = now
				}
				n.etcdOK, n.lastErr = true, ""
				n.mu.Unlock()
			}
		case <-tick.C:
			n.mu.Lock()
			expired := !n.leaseValid()
			since := time.Since(n.lastRenew)
			n.mu.Unlock()
			if expired {
				n.metrics.leaseLost.Inc()
				n.setErr(fmt.Errorf("etcd has not renewed the lease for %s (lease_ttl %s)", since.Round(time.Millisecond), n.ttl))
				n.log.Error("etcd unreachable: the lease may have expired, so this instance stops acting now (rounds, actions, notifications)",
					"since_renewal", since.Round(time.Millisecond), "lease_ttl", n.ttl)
				return errors.New("lease not renewed within lease_ttl")
			}
		}
	}
}

// checkLimit asks etcd, once, how many operations a transaction may have
// (the store's ProbeLimit) and warns when max_txn_ops says more: commits
// are then split by what etcd takes.
func (n *Node) checkLimit(ctx context.Context) {
	if n.limitChecked.Load() {
		return
	}
	used, configured, err := n.opts.Store.ProbeLimit(ctx)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("cannot ask etcd how many operations a transaction may have; a commit etcd refuses for its size asks again", "error", err)
		}
		return
	}
	n.limitChecked.Store(true)
	if used < configured {
		n.log.Warn("etcd takes fewer operations per transaction than control { store \"etcd\" { max_txn_ops } } says: commits are split by what etcd takes; set max_txn_ops to it, or raise etcd's --max-txn-ops",
			"max_txn_ops", configured, "etcd_takes", used)
		return
	}
	n.log.Info("etcd takes max_txn_ops operations per transaction; a larger commit is split and stays atomic", "max_txn_ops", used)
}

// endTerm gives up every role of the term: it stops acting first, then
// releases what it can in etcd (the lease is revoked so the others need
// not wait for it to expire; when etcd cannot be reached the next term
// revokes it).
func (n *Node) endTerm(lease clientv3.LeaseID) {
	// The campaign ended before (the term waits for it), counting the end
	// of a leadership.
	n.mu.Lock()
	n.memberRev, n.leading, n.ready = 0, false, false
	n.held, n.owned, n.releasing = map[string]int64{}, map[string]bool{}, map[string]bool{}
	n.leaderKey, n.leaderRev = "", 0
	n.mu.Unlock()
	n.metrics.update()
	// No wait for a round in progress: the engine no longer holds its
	// lock while a round's sources vote, so there is nothing to wait on,
	// and the fence makes it unneeded. From here the fence refuses every
	// write of this term: Writer, Site and Notifier need a valid lease and
	// the term's keys, which were just reset, so a round or an action that
	// commits late gets ErrFenced and writes nothing. A transaction etcd
	// evaluated before it dropped our keys was made within the term.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := n.cli.Revoke(ctx, lease); err != nil {
		n.addStale(lease)
	}
}

// maxStale bounds the leases of ended terms kept for revocation.
const maxStale = 16

func (n *Node) addStale(lease clientv3.LeaseID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stale = append(n.stale, lease)
	if len(n.stale) > maxStale {
		n.stale = n.stale[len(n.stale)-maxStale:]
	}
}

// revokeStale revokes the leases of ended terms that etcd could not be
// told about, so that their keys (an election key above all) do not make
// the others wait for them to expire. A lease etcd answers about is
// forgotten (revoked, or already expired); one it does not answer about
// is kept for the next term.
func (n *Node) revokeStale(ctx context.Context) {
	n.mu.Lock()
	stale := n.stale
	n.stale = nil
	n.mu.Unlock()
	for i, id := range stale {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := n.cli.Revoke(rctx, id)
		timedOut := rctx.Err() != nil
		cancel()
		if err != nil && timedOut {
			for _, rest := range stale[i:] {
				n.addStale(rest)
			}
			return
		}
	}
}

// campaign runs the election for the whole term: the leader runs rounds
// (active/standby) and delivers notifications (both modes). A leadership
// lost within the term (a fenced write, or etcd no longer names us) is
// resigned and the campaign runs again.
func (n *Node) campaign(ctx context.Context, el *concurrency.Election) {
	for ctx.Err() == nil {
		if err := n.leadOnce(ctx, el); err != nil && ctx.Err() == nil {
			n.log.Warn("campaign failed; campaigning again", "error", err, "retry_in", n.ttl/4)
			select {
			case <-ctx.Done():
			case <-time.After(n.ttl / 4):
			}
		}
	}
}

// leadOnce waits to be elected, then leads until the term ends or the
// leadership is lost.
func (n *Node) leadOnce(ctx context.Context, el *concurrency.Election) error {
	if err := el.Campaign(ctx, n.opts.ID+" "+n.opts.URL); err != nil {
		return fmt.Errorf("campaigning for %s: %w", n.key("leader"), err)
	}
	elected := time.Now()
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	led := false
	defer func() {
		n.mu.Lock()
		n.leading, n.ready, n.stopLeading = false, false, nil
		n.mu.Unlock()
		if led {
			n.metrics.leaderChanges.Inc() // stopped being the leader
		}
		n.metrics.update()
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = el.Resign(rctx)
	}()
	n.mu.Lock()
	if n.memberRev == 0 {
		n.mu.Unlock()
		return errors.New("elected after the term ended")
	}
	led = true
	n.leading, n.leaderKey, n.leaderRev, n.electedAt, n.stopLeading = true, el.Key(), el.Rev(), elected, stop
	n.leader, n.leaderSeenAt = Member{ID: n.opts.ID, URL: n.opts.URL}, elected
	eng := n.eng
	n.mu.Unlock()
	n.metrics.leaderChanges.Inc()
	start := time.Now()
	if err := n.takeOver(lctx, eng); err != nil {
		return fmt.Errorf("elected but cannot reload the state, so resigning: %w", err)
	}
	n.metrics.update()
	n.log.Info("elected leader", "id", n.opts.ID, "reload", time.Since(start).Round(time.Millisecond))
	if n.opts.OnLead != nil {
		n.opts.OnLead(lctx)
	}
	<-lctx.Done()
	return nil
}

// takeOver makes a newly elected leader ready: in active/standby mode it
// reloads the whole state first, so it never acts on what it held in
// memory. The reload and the readiness are one step for the standby's
// reloads (refreshMu), so none of them installs an older snapshot after.
func (n *Node) takeOver(ctx context.Context, eng *engine.Engine) error {
	n.refreshMu.Lock()
	defer n.refreshMu.Unlock()
	if !n.sharded && eng != nil {
		if err := eng.Refresh(ctx); err != nil {
			return err
		}
	}
	n.mu.Lock()
	n.ready = n.leading
	n.mu.Unlock()
	return nil
}

// followLeader keeps who leads, as etcd says: it reads the election's
// first key (a linearizable read, so an answer proves a quorum) at least
// every lease_ttl/4 and whenever a key of the election changes.
func (n *Node) followLeader(ctx context.Context) {
	prefix := n.key("leader") + "/"
	every := max(n.ttl/4, 100*time.Millisecond)
	for ctx.Err() == nil {
		sent := time.Now()
		gctx, cancel := context.WithTimeout(ctx, n.ttl)
		resp, err := n.cli.Get(gctx, prefix, clientv3.WithFirstCreate()...)
		cancel()
		var rev int64
		if err == nil {
			var key, value string
			if len(resp.Kvs) > 0 {
				key, value = string(resp.Kvs[0].Key), string(resp.Kvs[0].Value)
			}
			n.sawLeader(sent, key, value)
			rev = resp.Header.Revision
		}
		wctx, wcancel := context.WithTimeout(ctx, every)
		if rev > 0 {
			wch := n.cli.Watch(clientv3.WithRequireLeader(wctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
			select {
			case <-wch:
			case <-wctx.Done():
			}
		} else {
			<-wctx.Done()
		}
		wcancel()
	}
}

// sawLeader records what a read sent at sent found under the election
// prefix: its first key, whose value ("ID URL") is the leader; key is ""
// when it found none (none is elected).
//
// A leader that etcd no longer names (its key is gone, though its lease
// lives by our clock) stops acting at once and campaigns again: its
// writes would be fenced anyway. Only a read sent after the election
// counts: our key was first then, and a key created later cannot come
// before it.
func (n *Node) sawLeader(sent time.Time, key, value string) {
	n.mu.Lock()
	n.heard(sent)
	deposed := false
	if n.leading && !sent.Before(n.electedAt) && key != n.leaderKey {
		n.deposeLocked()
		deposed = true
	}
	if sent.Before(n.leaderSeenAt) && !deposed {
		// A later answer (or our own election) already said who leads.
		n.mu.Unlock()
		return
	}
	prev := n.leader
	if key == "" {
		n.leader = Member{}
	} else {
		id, url, _ := strings.Cut(value, " ")
		n.leader = Member{ID: id, URL: url}
	}
	n.leaderSeenAt = sent
	changed := prev != n.leader
	n.mu.Unlock()
	if deposed {
		n.log.Error("etcd no longer names this instance the leader (its election key is gone): it stops acting now and campaigns again", "leader", value)
	}
	if changed || deposed {
		n.metrics.update()
	}
}

// watchMembers keeps the member list.
func (n *Node) watchMembers(ctx context.Context) {
	prefix := n.key("members") + "/"
	for ctx.Err() == nil {
		sent := time.Now()
		resp, err := n.cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			n.setErr(err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		var ms []Member
		for _, kv := range resp.Kvs {
			ms = append(ms, Member{ID: strings.TrimPrefix(string(kv.Key), prefix), URL: string(kv.Value)})
		}
		sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
		n.mu.Lock()
		n.heard(sent)
		changed := !sameMembers(n.members, ms)
		n.members = ms
		n.mu.Unlock()
		if changed {
			n.log.Info("cluster members", "members", len(ms))
			n.kick()
		}
		wch := n.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		for range wch {
			break // re-list on any change
		}
	}
}

func sameMembers(a, b []Member) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// watchState reloads what others committed: all of it on a standby, the
// sites owned elsewhere on a shard. It follows the counters (P/meta) and
// nothing else: a commit writes them in its last transaction, the whole
// commit when it fits in one and the commit marker of a split one (see
// core/store/etcdstore, "Split commits"). Before the marker a split commit's
// staged writes are invisible to Load, and from it Load sees them all, so
// a reload on P/meta finds each commit whole. Changes are coalesced.
func (n *Node) watchState(ctx context.Context) {
	st := n.opts.Store
	missed := false
	for ctx.Err() == nil {
		wch := n.cli.Watch(clientv3.WithRequireLeader(ctx), st.MetaKey())
		if missed {
			// Commits may have landed while the watch was down.
			n.refreshOthers(ctx)
		}
		missed = true
		for resp := range wch {
			if resp.Err() != nil {
				break
			}
			if len(resp.Events) == 0 {
				n.watched.Add(1)
				continue
			}
			// Coalesce a burst (several instances' commits).
			drain := time.After(20 * time.Millisecond)
		more:
			for {
				select {
				case _, ok := <-wch:
					if !ok {
						break more
					}
				case <-drain:
					break more
				}
			}
			n.refreshOthers(ctx)
			n.watched.Add(1)
			if n.opts.OnStoreChange != nil {
				n.opts.OnStoreChange()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// refreshOthers reloads what others wrote: everything on a standby, the
// sites owned elsewhere on a shard, nothing on the leader.
func (n *Node) refreshOthers(ctx context.Context) {
	n.refreshMu.Lock()
	n.mu.Lock()
	eng, ready, sharded := n.eng, n.ready, n.sharded
	n.mu.Unlock()
	if eng == nil {
		n.refreshMu.Unlock()
		return
	}
	if sharded {
		// The engine queues what it cannot take now (a round commits):
		// the wait for it is outside refreshMu, so claims go on
		// meanwhile (engine.Claim).
		err := n.reloadChanged(ctx, eng)
		n.refreshMu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("cannot reload the state from etcd; views may lag", "error", err)
			}
			return
		}
		eng.TakeLoads(ctx)
		n.reloads.Add(1)
		return
	}
	defer n.refreshMu.Unlock()
	var err error
	switch {
	case !ready:
		err = eng.Refresh(ctx)
	default:
		return // the leader wrote it
	}
	if err != nil && ctx.Err() == nil {
		n.log.Warn("cannot reload the state from etcd; views may lag", "error", err)
		return
	}
	n.reloads.Add(1)
}

// reloadUnowned reloads the sites this instance does not own, all of
// them (engine.Follow: queued while a round commits; TakeLoads waits for
// them). Called with refreshMu held.
func (n *Node) reloadUnowned(ctx context.Context, eng *engine.Engine) error {
	st, rev, err := n.opts.Store.LoadSince(ctx, 0)
	if err != nil {
		return fmt.Errorf("refreshing from the store: %w", err)
	}
	eng.Follow(ctx, st, n.unowned(nil))
	n.seenRev = rev
	return nil
}

// reloadChanged reloads the sites this instance does not own that were
// written since the last reload (LoadSince): another shard's commit costs
// this one the sites it wrote, not the whole store. The first reload is
// whole. Called with refreshMu held.
func (n *Node) reloadChanged(ctx context.Context, eng *engine.Engine) error {
	if n.seenRev == 0 {
		return n.reloadUnowned(ctx, eng)
	}
	st, rev, err := n.opts.Store.LoadSince(ctx, n.seenRev)
	if err != nil {
		return fmt.Errorf("refreshing from the store: %w", err)
	}
	eng.Follow(ctx, st, n.unowned(st.Sites))
	n.seenRev = rev
	n.partialReloads.Add(1)
	return nil
}

// unowned picks the sites this instance does not own (of in, when in is
// not nil). A site being released counts as another's already: a round
// that planned it is discarded (the handover's barrier).
func (n *Node) unowned(in map[string]store.Site) func(site string) bool {
	return func(site string) bool {
		if in != nil {
			if _, ok := in[site]; !ok {
				return false
			}
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		return !n.owned[site] || n.releasing[site]
	}
}
