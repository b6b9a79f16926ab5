package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// acks tells the control plane, for every publication version the node
// follows, when its edge applied it and what the node saw of the levels
// that version made it leave (POST /v1/publication/applied, through
// publication.Follower.Acknowledge): the control plane's failover
// reports (vigil's docs/failover-time.md) are built from them.
//
// A node with only its own proxy applied a version when the proxy took
// it; a node that drives edges (HAProxy, templates), when every edge
// applied it, or when the first of them refused it (the error is sent).
// A control plane that does not take acknowledgements (an older one) is
// not asked again.
type acks struct {
	node     string
	proxying bool
	drivers  int
	log      hclog.Logger
	now      func() time.Time

	mu sync.Mutex
	// waiting are the versions whose edges have not all applied them,
	// oldest first, and edges each edge's last version applied.
	waiting []*pendingAck
	edges   map[string]uint64
	// last is the last acknowledgement sent (resent by hello).
	last publication.Applied
	// unsupported are the control planes that answered they take none.
	unsupported map[string]bool
	// send sends one acknowledgement (tests replace it).
	send func(ctx context.Context, target string, a publication.Applied) error
	ctx  context.Context

	wg sync.WaitGroup

	sentMu sync.Mutex
	// sent is when the proxy last sent a request to each origin of each
	// site (by published names).
	sent map[sentKey]time.Time
}

type sentKey struct{ site, origin string }

type pendingAck struct {
	target string
	ack    publication.Applied
	// left are the sites the version changed, with the origins of the
	// level they left, for LastRequest.
	left map[string][]string
}

func newAcks(node string, proxying bool, drivers int, log hclog.Logger) *acks {
	return &acks{node: node, proxying: proxying, drivers: drivers, log: log, now: time.Now,
		edges: map[string]uint64{}, unsupported: map[string]bool{}, sent: map[sentKey]time.Time{}}
}

// attempt notes when the proxy sent an attempt (proxy.Options.OnAttempt).
func (k *acks) attempt(a proxy.Attempt) {
	at := k.now().Add(-a.Latency)
	key := sentKey{a.Site, a.Origin}
	k.sentMu.Lock()
	if at.After(k.sent[key]) {
		k.sent[key] = at
	}
	k.sentMu.Unlock()
}

// changes are the sites whose level differs between prev and next, with
// what the node's passive windows hold of the origins of the level each
// left (p nil: no windows). Called before next is applied, so that the
// windows of the level left are counted as they stand.
func changes(prev, next *publication.Snapshot, p *passive) ([]publication.AppliedSite, map[string][]string) {
	if prev == nil {
		return nil, nil
	}
	before := make(map[string]*publication.Site, len(prev.Sites))
	for i := range prev.Sites {
		before[prev.Sites[i].Name] = &prev.Sites[i]
	}
	var out []publication.AppliedSite
	left := map[string][]string{}
	for i := range next.Sites {
		s := &next.Sites[i]
		b := before[s.Name]
		if b == nil || b.Level == s.Level {
			continue
		}
		c := publication.AppliedSite{Site: s.Name, FromLevel: b.Level, ToLevel: s.Level}
		for _, o := range b.Origins {
			left[s.Name] = append(left[s.Name], o.Name)
			if p != nil {
				n, f := p.counts(o.Address)
				c.Requests += n
				c.Failures += f
			}
		}
		out = append(out, c)
	}
	return out, left
}

// counts are the attempts in address's window within the age limit (all
// of them in a held window), and the failed ones, with no side effect.
func (p *passive) counts(address string) (requests, failures int) {
	p.mu.RLock()
	w := p.m[address]
	p.mu.RUnlock()
	if w == nil {
		return 0, 0
	}
	limit := p.now().Add(-p.age).UnixNano()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held {
		limit = -1 << 63
	}
	for i := range w.n {
		o := w.ring[(w.next-1-i+2*len(w.ring))%len(w.ring)]
		if o.at <= limit {
			break
		}
		requests++
		if failed(o.kind) {
			failures++
		}
	}
	return requests, failures
}

// expect notes that snap, from the control plane target, is about to be
// applied; sites and left are its changes. When the node drives edges,
// their applies (edgeApplied) end the wait, which starts before the
// version is handed to them so that none is missed; otherwise the
// caller calls applied once the proxy took it.
func (k *acks) expect(target string, snap *publication.Snapshot, sites []publication.AppliedSite, left map[string][]string) *pendingAck {
	p := &pendingAck{target: target, left: left,
		ack: publication.Applied{Node: k.node, Version: snap.Version, Proxying: k.proxying, Sites: sites}}
	if k.drivers > 0 {
		k.mu.Lock()
		k.waiting = append(k.waiting, p)
		k.mu.Unlock()
	}
	return p
}

// applied ends p when the node drives no edge: the proxy took it now.
func (k *acks) applied(p *pendingAck) {
	if k.drivers > 0 {
		return
	}
	p.ack.At = k.now()
	k.finish(p)
}

// applyFollowed applies snap, followed from the control plane target,
// and acknowledges it.
func (a *Agent) applyFollowed(target string, snap *publication.Snapshot) {
	if a.acks == nil {
		a.apply(snap, true)
		return
	}
	sites, left := changes(a.current.Load(), snap, a.passive)
	p := a.acks.expect(target, snap, sites, left)
	a.apply(snap, true)
	a.acks.applied(p)
}

// edgeApplied is the edge hub's report of one edge's apply
// (edge.HubOptions.OnApplied).
func (k *acks) edgeApplied(r edge.Applied) {
	var done []*pendingAck
	k.mu.Lock()
	if r.Err == nil {
		k.edges[r.Edge] = max(k.edges[r.Edge], r.Version)
	}
	keep := k.waiting[:0]
	for _, p := range k.waiting {
		v := p.ack.Version
		switch {
		case r.Err != nil && r.Version >= v:
			p.ack.At, p.ack.Error = r.At, fmt.Sprintf("edge %s: %v", r.Edge, r.Err)
			done = append(done, p)
		case r.Err == nil && k.allApplied(v):
			p.ack.At = r.At
			done = append(done, p)
		default:
			keep = append(keep, p)
		}
	}
	clear(k.waiting[len(keep):])
	k.waiting = keep
	k.mu.Unlock()
	for _, p := range done {
		k.finish(p)
	}
}

// allApplied says every edge applied version v or a later one. k.mu is
// held.
func (k *acks) allApplied(v uint64) bool {
	if len(k.edges) < k.drivers {
		return false
	}
	for _, got := range k.edges {
		if got < v {
			return false
		}
	}
	return true
}

// finish fills the last requests sent to the levels left and sends the
// acknowledgement, without waiting for it.
func (k *acks) finish(p *pendingAck) {
	if k.proxying {
		k.sentMu.Lock()
		for i := range p.ack.Sites {
			s := &p.ack.Sites[i]
			var last time.Time
			for _, o := range p.left[s.Site] {
				if t := k.sent[sentKey{s.Site, o}]; t.After(last) {
					last = t
				}
			}
			if !last.IsZero() {
				s.LastRequest = &last
			}
		}
		k.sentMu.Unlock()
	}
	k.mu.Lock()
	k.last = p.ack
	k.mu.Unlock()
	k.post(p.target, p.ack, false)
}

// hello tells target of the version the node serves, cur, when it starts
// following it (at the node's start, after the control plane was
// unreachable, or after moving to another one): a control plane that
// restarted, or a standby that took over, learns of the node before the
// next version, so that its next failover's report expects it. It
// resends the last acknowledgement when it is cur's; a failure is only
// logged at debug level. After an outage (again), a control plane that
// took no acknowledgements is asked again: it may have been upgraded.
func (k *acks) hello(target string, cur *publication.Snapshot, again bool) {
	if k == nil || cur == nil {
		return
	}
	k.mu.Lock()
	a := k.last
	if again {
		delete(k.unsupported, target)
	}
	k.mu.Unlock()
	if a.Version != cur.Version {
		a = publication.Applied{Node: k.node, Version: cur.Version, At: k.now(), Proxying: k.proxying}
	}
	k.post(target, a, true)
}

// post sends a to target without waiting; quiet logs a failure at debug
// level only.
func (k *acks) post(target string, a publication.Applied, quiet bool) {
	k.mu.Lock()
	skip, ctx := k.unsupported[target], k.ctx
	k.mu.Unlock()
	if skip || ctx == nil || k.send == nil {
		return
	}
	k.wg.Go(func() {
		err := k.send(ctx, target, a)
		switch {
		case errors.Is(err, publication.ErrAcknowledgeUnsupported):
			k.mu.Lock()
			k.unsupported[target] = true
			k.mu.Unlock()
			k.log.Info("the control plane takes no acknowledgements of applied publications (it is older than this node): its failover reports show this node as not reported", "control_plane", target)
		case err != nil && ctx.Err() == nil && quiet:
			k.log.Debug("the control plane was not told of the version served", "control_plane", target, "version", a.Version, "error", err)
		case err != nil && ctx.Err() == nil:
			k.log.Warn("the acknowledgement of an applied publication was not delivered; the failover report shows this node as not reported", "control_plane", target, "version", a.Version, "error", err)
		}
	})
}

// wait waits for the sends under way; nil-safe.
func (k *acks) wait() {
	if k != nil {
		k.wg.Wait()
	}
}

// start lets acknowledgements out, through the control planes' client,
// until ctx ends.
func (k *acks) start(ctx context.Context, cp *controlPlanes, token string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ctx = ctx
	if k.send == nil && cp != nil {
		k.send = func(ctx context.Context, target string, a publication.Applied) error {
			f := &publication.Follower{BaseURL: target, Token: token, Client: cp.client}
			return f.Acknowledge(ctx, a)
		}
	}
}

// nodeName is the node's name in acknowledgements: its id, else the
// machine's host name.
func nodeName(id string) string {
	if id != "" {
		return id
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "unnamed-node"
}
