package edge

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Removing the servers vigil-node added.
//
// Which servers: only those vigil-node added at run time, recognised in
// show servers state by their id. A server is named after its origin
// whether it comes from haproxy.cfg or from add server, so the name cannot
// tell them apart, and HAProxy 2.6's del server deletes configuration
// servers too. So every add server vigil-node sends carries `id N` with N
// from dynamicIDBase up (the lowest one free in the backend), and only a
// server whose srv_f_forced_id is 1 and whose srv_id is that high is ever
// deleted. HAProxy numbers the servers it is not given an id for from 1,
// so no server of haproxy.cfg (or one added by hand without an id) gets
// there unless the operator writes such an id. Servers added by a vigil-node
// older than this (no id) are kept in maintenance like configuration
// servers; HAProxy's next reload drops them (dynamic servers do not survive
// a reload).
//
// An origin's backup server (NAME:backup, see BackupSuffix) is one more
// server vigil-node added: kept while its origin is in any level of the
// site, and removed with it.
//
// When: a server vigil-node added whose origin is in none of its site's
// levels (not in Origins, Ramp.Origins or Others), or whose site left the
// publication, is put in maintenance at once (new requests go elsewhere,
// requests in flight carry on), and deleted at the first apply once it has
// been so for RemoveAfter: that grace covers a View built before the
// topology came in (just after vigil-node starts, the other levels are not
// known for a moment) and lets the requests in flight end. HAProxy refuses
// del server while the server has a session, a queued request or an idle
// connection; the refusal is logged, the server stays in maintenance and
// the deletion is tried again at every later apply (each publication, and
// every resync). It never fails the apply. The requests in flight win:
// sessions are cut (shutdown sessions server) only when DrainTimeout is
// set, once the server has been in maintenance that long.
//
// A site that left the publication: its backend (haproxy.cfg's) stays; its
// configuration servers go to maintenance and the ones vigil-node added are
// deleted as above. Only the backends of sites vigil-node applied since it
// started are handled so: a backend it never saw in a View (another
// vigil-node's, or the operator's) is left alone.

// DefaultHAProxyRemoveAfter is how long a server vigil-node added stays in
// maintenance, out of every level of its site, before it is deleted.
const DefaultHAProxyRemoveAfter = time.Minute

// dynamicIDBase is the first id vigil-node gives the servers it adds.
const dynamicIDBase = 1_000_000_000

// Removal is a server vigil-node added whose origin left every level of
// its site (or whose site left the publication): in maintenance, to be
// deleted.
type Removal struct {
	Backend, Server string
	// SiteRemoved is true when the whole site left the publication.
	SiteRemoved bool
	// Since is when the server was first found out of every level.
	Since time.Time
	// Refused counts the del server HAProxy refused; Err is its last
	// answer ("Server still has connections attached to it...").
	Refused int
	Err     string
}

type removals struct {
	mu sync.Mutex
	// backends are those of the sites of the Views applied: false while
	// the site is published, true once it left (until its servers are
	// all handled).
	backends map[string]bool
	pending  map[string]*Removal // by backend/server
}

func newRemovals() removals {
	return removals{backends: map[string]bool{}, pending: map[string]*Removal{}}
}

// removalPass is one Apply's view of the removals.
type removalPass struct {
	now  time.Time
	view map[string]bool // backends of the View
	done map[string]bool // backends whose servers were all looked at
	seen map[string]bool // pending servers still out of every level
}

func (r *removals) begin(v *View, now time.Time) *removalPass {
	p := &removalPass{now: now, view: map[string]bool{}, done: map[string]bool{}, seen: map[string]bool{}}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range v.Sites {
		p.view[s.Backend] = true
		r.backends[s.Backend] = false
	}
	return p
}

// end forgets the pending removals of the backends looked at whose server
// is back in a level, or gone.
func (r *removals) end(p *removalPass) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, rm := range r.pending {
		if p.done[rm.Backend] && !p.seen[key] {
			delete(r.pending, key)
		}
	}
}

// Removals returns the servers waiting for their deletion, by backend and
// name.
func (h *HAProxy) Removals() []Removal {
	h.rm.mu.Lock()
	defer h.rm.mu.Unlock()
	out := make([]Removal, 0, len(h.rm.pending))
	for _, r := range h.rm.pending {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Removal) int {
		return strings.Compare(a.Backend+"/"+a.Server, b.Backend+"/"+b.Server)
	})
	return out
}

// nextID is the lowest id from dynamicIDBase that no server of the
// backend has.
func nextID(servers map[string]server) int {
	used := map[int]bool{}
	for _, s := range servers {
		used[s.id] = true
	}
	id := dynamicIDBase
	for used[id] {
		id++
	}
	return id
}

// removeLeft handles the servers vigil-node added to a published site's
// backend that are in none of its levels (not in taken).
func (h *HAProxy) removeLeft(ctx context.Context, backend string, servers map[string]server, taken map[string]bool, p *removalPass) (int, error) {
	p.done[backend] = true
	changes := 0
	for _, name := range sortedKeys(servers) {
		if srv := servers[name]; srv.added && !taken[name] {
			n, err := h.remove(ctx, backend, srv, servers, p, false)
			changes += n
			if err != nil {
				return changes, err
			}
		}
	}
	return changes, nil
}

// removedSites handles the backends of the sites that left the
// publication: configuration servers to maintenance, vigil-node's deleted.
func (h *HAProxy) removedSites(ctx context.Context, state map[string]map[string]server, p *removalPass) (int, error) {
	h.rm.mu.Lock()
	var gone, left []string
	for be, logged := range h.rm.backends {
		if p.view[be] {
			continue
		}
		gone = append(gone, be)
		if !logged {
			h.rm.backends[be] = true
			left = append(left, be)
		}
	}
	h.rm.mu.Unlock()
	slices.Sort(gone)
	slices.Sort(left)
	for _, be := range left {
		h.opts.Log.Info("site out of the publication: its backend's servers go to maintenance, those vigil-node added are deleted once drained", "backend", be)
	}
	changes := 0
	var errs []error
	for _, be := range gone {
		servers := state[be]
		p.done[be] = true
		clean := true
		for _, name := range sortedKeys(servers) {
			srv := servers[name]
			if srv.added {
				n, err := h.remove(ctx, be, srv, servers, p, true)
				changes += n
				if err != nil {
					errs = append(errs, err)
					if errors.Is(err, ErrRuntimeUnreachable) {
						return changes, errors.Join(errs...)
					}
				}
				if _, still := servers[name]; still {
					clean = false
				}
				continue
			}
			if srv.admin&adminFMaint != 0 {
				continue
			}
			if err := h.expect(ctx, "set server "+be+"/"+name+" state maint", ""); err != nil {
				errs = append(errs, err)
				clean = false
				continue
			}
			changes++
		}
		if clean {
			// Done: its configuration servers are left in maintenance,
			// and the backend to the operator.
			h.rm.mu.Lock()
			delete(h.rm.backends, be)
			h.rm.mu.Unlock()
		}
	}
	return changes, errors.Join(errs...)
}

// remove puts one server vigil-node added in maintenance and deletes it
// once RemoveAfter has passed and HAProxy lets it. A refused deletion is
// logged and left for the next apply; only an unreachable (or refusing)
// Runtime API is an error.
func (h *HAProxy) remove(ctx context.Context, backend string, srv server, servers map[string]server, p *removalPass, siteRemoved bool) (int, error) {
	id := backend + "/" + srv.name
	p.seen[id] = true
	h.rm.mu.Lock()
	r := h.rm.pending[id]
	first := r == nil
	if first {
		r = &Removal{Backend: backend, Server: srv.name, SiteRemoved: siteRemoved, Since: p.now}
		h.rm.pending[id] = r
	}
	r.SiteRemoved = siteRemoved
	age := p.now.Sub(r.Since)
	h.rm.mu.Unlock()
	if first {
		h.opts.Log.Info("origin out of every level of its site: the server vigil-node added is in maintenance, and deleted once drained",
			"server", id, "site_removed", siteRemoved, "delete_after", h.opts.RemoveAfter.String())
	}

	changes := 0
	if first && strings.Contains(" "+h.opts.ServerArgs+" ", " agent-check ") {
		// An agent may take the server out of maintenance: HAProxy's
		// management guide has it disabled before a deletion.
		if _, err := h.Command(ctx, "disable agent "+id); err != nil {
			return changes, err
		}
	}
	if srv.admin&adminFMaint == 0 {
		if err := h.expect(ctx, "set server "+id+" state maint", ""); err != nil {
			return changes, err
		}
		srv.admin |= adminFMaint
		servers[srv.name] = srv
		changes++
	}
	if age < h.opts.RemoveAfter {
		return changes, nil
	}
	out, err := h.Command(ctx, "del server "+id)
	if err != nil {
		return changes, err
	}
	if refusedForSessions(out) && h.opts.DrainTimeout > 0 && age >= h.opts.DrainTimeout {
		// Past the drain timeout: cut what still runs, then try again
		// (HAProxy ends the sessions asynchronously: the next apply
		// deletes the server if this one is too early).
		if err := h.expect(ctx, "shutdown sessions server "+id, ""); err != nil {
			return changes, err
		}
		h.opts.Log.Warn("the server's sessions outlived the drain timeout: cut", "server", id, "drain_timeout", h.opts.DrainTimeout.String())
		changes++
		if out, err = h.Command(ctx, "del server "+id); err != nil {
			return changes, err
		}
	}
	switch {
	case strings.HasPrefix(out, "Server deleted"), strings.HasPrefix(out, "No such server"):
		if strings.HasPrefix(out, "Server deleted") {
			changes++
			h.opts.Log.Info("server deleted", "server", id, "out_of_service_for", age.Round(time.Millisecond).String())
		}
		delete(servers, srv.name)
		h.rm.mu.Lock()
		delete(h.rm.pending, id)
		h.rm.mu.Unlock()
	default:
		msg := firstLine(out)
		h.rm.mu.Lock()
		r.Refused++
		first, changed := r.Refused == 1, r.Err != msg
		r.Err = msg
		refused := r.Refused
		h.rm.mu.Unlock()
		if first || changed {
			h.opts.Log.Warn("HAProxy refused to delete the server: it stays in maintenance, deleted at a later apply", "server", id, "answer", msg)
		} else {
			h.opts.Log.Debug("HAProxy still refuses to delete the server", "server", id, "answer", msg, "refused", strconv.Itoa(refused))
		}
	}
	return changes, nil
}

// refusedForSessions tells del server's answer for a server that still
// has connections.
func refusedForSessions(out string) bool {
	return strings.Contains(out, "still has connections")
}
