package ha

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcd"
)

// Roles of an instance.
const (
	RoleLeader  = "leader"
	RoleStandby = "standby"
	RoleShard   = "shard"
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

// Member is one live instance.
type Member struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

// Node is this instance's place in the cluster. Its methods are safe for
// concurrent use.
type Node struct {
	opts    Options
	log     hclog.Logger
	cli     *clientv3.Client
	ttl     time.Duration
	sharded bool
	metrics *metrics

	mu        sync.Mutex
	eng       *engine.Engine
	lease     clientv3.LeaseID
	lastRenew time.Time // last keep-alive answer of the current lease
	memberRev int64     // create revision of our member key, 0 outside a term
	leading   bool      // we hold the election key of this term
	ready     bool      // leading and reloaded from the store
	leaderKey string
	leaderRev int64
	leader    Member
	members   []Member
	held      map[string]int64 // sharded: owner keys we hold, by site
	owned     map[string]bool  // sharded: held and refreshed: we probe these
	etcdOK    bool
	lastErr   string
	wake      chan struct{} // sharded: reconcile now
}

// New prepares a node; Start begins its first term.
func New(opts Options) *Node {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	n := &Node{opts: opts, log: opts.Logger, cli: opts.Client, ttl: opts.Config.LeaseTTL,
		sharded: opts.Config.Mode == config.ModeSharded, held: map[string]int64{}, owned: map[string]bool{},
		wake: make(chan struct{}, 1)}
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
		return n.owned[site] && n.leaseValid()
	}
}

// OnCommitError is the engine's Options.OnCommitError: a fenced commit
// means our term is over; reload what the store holds.
func (n *Node) OnCommitError(err error) {
	if !errors.Is(err, etcdstore.ErrFenced) {
		return
	}
	n.metrics.fenced.Inc()
	n.log.Error("a write was refused by the fence: this instance lost its role; it stops acting and reloads the stored state", "error", err)
	n.mu.Lock()
	n.ready = false
	n.leading = false
	n.owned = map[string]bool{}
	n.mu.Unlock()
	n.kick()
}

func (n *Node) kick() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Start runs terms until ctx ends. eng must be built with Active, Owns
// and OnCommitError from this node.
func (n *Node) Start(ctx context.Context, eng *engine.Engine) <-chan struct{} {
	n.mu.Lock()
	n.eng = eng
	n.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.terms(ctx)
	}()
	go n.watchState(ctx)
	return done
}

func (n *Node) setErr(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err == nil {
		n.etcdOK, n.lastErr = true, ""
		return
	}
	n.etcdOK, n.lastErr = false, err.Error()
}

// terms starts a term, waits for its lease to be lost, and starts again.
func (n *Node) terms(ctx context.Context) {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := n.term(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			n.setErr(err)
			n.log.Error("etcd: cannot hold a lease; this instance does not act until it can", "error", err, "retry_in", backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, n.ttl)
	}
}

// term is one lease's life.
func (n *Node) term(parent context.Context) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	gctx, gcancel := context.WithTimeout(ctx, n.ttl)
	lease, err := n.cli.Grant(gctx, int64(n.ttl/time.Second))
	gcancel()
	if err != nil {
		return fmt.Errorf("granting a lease of %s: %w", n.ttl, err)
	}
	ka, err := n.cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		return fmt.Errorf("keeping lease %x alive: %w", lease.ID, err)
	}
	granted := time.Now()
	pctx, pcancel := context.WithTimeout(ctx, n.ttl)
	put, err := n.cli.Put(pctx, n.key("members", n.opts.ID), n.opts.URL, clientv3.WithLease(lease.ID))
	pcancel()
	if err != nil {
		return fmt.Errorf("registering member %s: %w", n.opts.ID, err)
	}
	n.mu.Lock()
	n.lease, n.lastRenew, n.memberRev = lease.ID, granted, put.Header.Revision
	n.etcdOK, n.lastErr = true, ""
	n.mu.Unlock()
	n.log.Info("joined the cluster", "id", n.opts.ID, "mode", n.opts.Config.Mode, "lease_ttl", n.ttl)
	defer n.endTerm(lease.ID)

	sess, err := concurrency.NewSession(n.cli, concurrency.WithLease(lease.ID), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("etcd session: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(2)
	go func() { defer wg.Done(); n.campaign(ctx, sess) }()
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
				n.mu.Lock()
				n.lastRenew = time.Now()
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

// endTerm gives up every role of the term: it stops acting first, then
// releases what it can in etcd (the lease is revoked so the others need
// not wait for it to expire).
func (n *Node) endTerm(lease clientv3.LeaseID) {
	n.mu.Lock()
	wasLeader := n.leading
	n.memberRev, n.leading, n.ready = 0, false, false
	n.held, n.owned = map[string]int64{}, map[string]bool{}
	n.leaderKey, n.leaderRev = "", 0
	eng := n.eng
	n.mu.Unlock()
	if wasLeader {
		n.metrics.leaderChanges.Inc()
	}
	n.metrics.update()
	if eng != nil {
		_ = eng.Config() // waits for a round in progress: it is fenced anyway
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = n.cli.Revoke(ctx, lease)
}

// campaign runs the election: the leader runs rounds (active/standby)
// and delivers notifications (both modes).
func (n *Node) campaign(ctx context.Context, sess *concurrency.Session) {
	el := concurrency.NewElection(sess, n.key("leader"))
	go n.observe(ctx, el)
	if err := el.Campaign(ctx, n.opts.ID+" "+n.opts.URL); err != nil {
		return
	}
	n.mu.Lock()
	if n.memberRev == 0 {
		n.mu.Unlock()
		return
	}
	n.leading, n.leaderKey, n.leaderRev = true, el.Key(), el.Rev()
	n.leader = Member{ID: n.opts.ID, URL: n.opts.URL}
	eng := n.eng
	n.mu.Unlock()
	n.metrics.leaderChanges.Inc()
	start := time.Now()
	if !n.sharded && eng != nil {
		// Never act on what we held in memory: reload first.
		if err := eng.Refresh(ctx); err != nil {
			n.log.Error("elected but cannot reload the state; resigning", "error", err)
			_ = el.Resign(context.Background())
			return
		}
	}
	n.mu.Lock()
	n.ready = n.leading
	n.mu.Unlock()
	n.metrics.update()
	n.log.Info("elected leader", "id", n.opts.ID, "reload", time.Since(start).Round(time.Millisecond))
	if n.opts.OnLead != nil {
		n.opts.OnLead(ctx)
	}
	<-ctx.Done()
	rctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = el.Resign(rctx)
}

// observe follows who leads.
func (n *Node) observe(ctx context.Context, el *concurrency.Election) {
	for resp := range el.Observe(ctx) {
		if len(resp.Kvs) == 0 {
			continue
		}
		id, url, _ := strings.Cut(string(resp.Kvs[0].Value), " ")
		n.mu.Lock()
		n.leader = Member{ID: id, URL: url}
		n.mu.Unlock()
		n.metrics.update()
	}
}

// watchMembers keeps the member list.
func (n *Node) watchMembers(ctx context.Context) {
	prefix := n.key("members") + "/"
	for ctx.Err() == nil {
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

// watchState reloads what others wrote: all of it on a standby, the
// sites owned elsewhere on a shard. Changes are coalesced.
func (n *Node) watchState(ctx context.Context) {
	st := n.opts.Store
	for ctx.Err() == nil {
		wch := n.cli.Watch(clientv3.WithRequireLeader(ctx), st.Prefix()+"/", clientv3.WithPrefix(), clientv3.WithFilterDelete())
		for resp := range wch {
			if resp.Err() != nil {
				break
			}
			relevant := false
			for _, ev := range resp.Events {
				k := string(ev.Kv.Key)
				if k == st.MetaKey() || strings.HasPrefix(k, st.SitesPrefix()) {
					relevant = true
				}
			}
			if !relevant {
				continue
			}
			// Coalesce a burst (a round's commit is several writes).
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

func (n *Node) refreshOthers(ctx context.Context) {
	n.mu.Lock()
	eng, ready, sharded := n.eng, n.ready, n.sharded
	n.mu.Unlock()
	if eng == nil {
		return
	}
	var err error
	switch {
	case sharded:
		err = eng.RefreshSites(ctx, func(site string) bool {
			n.mu.Lock()
			defer n.mu.Unlock()
			return !n.owned[site]
		})
	case !ready:
		err = eng.Refresh(ctx)
	default:
		return // the leader wrote it
	}
	if err != nil && ctx.Err() == nil {
		n.log.Warn("cannot reload the state from etcd; views may lag", "error", err)
	}
}
