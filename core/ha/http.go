package ha

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/api"
)

// States of an instance, Info.State: what it knows of the cluster now
// (package api defines them with the type).
const (
	StateActing     = api.StateActing
	StateStandby    = api.StateStandby
	StateTakingOver = api.StateTakingOver
	StateNoLeader   = api.StateNoLeader
	StateJoining    = api.StateJoining
	StateNoQuorum   = api.StateNoQuorum
)

// Info is GET /v1/cluster: the API's ClusterInfo.
type Info = api.ClusterInfo

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Ago formats a duration for the operator: tenths of a second below 10s,
// whole seconds above.
func Ago(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// Info describes this instance's place in the cluster.
func (n *Node) Info() Info {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	valid := n.leaseValid()
	quorum := n.quorum(now)
	info := Info{ID: n.opts.ID, URL: n.opts.URL, Mode: n.opts.Config.Mode, Members: append([]Member{}, n.members...),
		Etcd: "ok", Quorum: quorum, AsOf: now}
	if !n.lastContact.IsZero() {
		t := n.lastContact
		info.EtcdSeenAt = &t
	}
	switch {
	case n.lastErr != "":
		info.Etcd = "unreachable: " + n.lastErr
	case !quorum && n.lastContact.IsZero():
		info.Etcd = "unreachable: no answer yet"
	case !quorum:
		info.Etcd = fmt.Sprintf("unreachable: no answer for %s (lease_ttl %s)", Ago(now.Sub(n.lastContact)), n.ttl)
	case !valid:
		info.Etcd = "no lease yet"
	}
	switch {
	case !valid:
		info.Role = RoleDetached
	case n.sharded:
		info.Role, info.Acting = RoleShard, true
		for s := range n.owned {
			info.Owned = append(info.Owned, s)
		}
		sort.Strings(info.Owned)
		info.OwnedSites = len(info.Owned)
	case n.ready:
		info.Role, info.Acting = RoleLeader, true
		if n.eng != nil {
			if v := n.eng.Views(); v != nil {
				info.OwnedSites = v.Len()
			}
		}
	default:
		info.Role = RoleStandby
	}
	if info.Role == RoleLeader {
		// The holder of this term's election key, renewed with the lease.
		n.leader, n.leaderSeenAt = Member{ID: n.opts.ID, URL: n.opts.URL}, maxTime(n.leaderSeenAt, n.lastRenew)
	}
	if n.leader.ID != "" {
		l := n.leader
		info.Leader = &l
		if !n.leaderSeenAt.IsZero() {
			t := n.leaderSeenAt
			info.LeaderSeenAt = &t
		}
		if l.ID == n.opts.ID {
			// Only the holder of this term's election key is the leader:
			// a key of an ended term proves nothing.
			info.LeaderConfirmed = n.leading && valid
		} else {
			info.LeaderConfirmed = quorum && !n.leaderSeenAt.IsZero() && now.Sub(n.leaderSeenAt) < n.ttl
		}
	}
	switch {
	case info.Acting:
		info.State = StateActing
	case !quorum:
		info.State = StateNoQuorum
	case !valid:
		info.State = StateJoining
	case n.leading:
		info.State = StateTakingOver
	case info.LeaderConfirmed:
		info.State = StateStandby
	default:
		info.State = StateNoLeader
	}
	return info
}

// Handler serves GET /v1/cluster and answers a change sent to an
// instance that may not make it (a standby; a shard that does not own
// the site; an instance cut off from etcd) with 421 and what it knows of
// the instance to send it to. It passes everything else to next.
func (n *Node) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cluster" && r.Method == http.MethodGet {
			n.metrics.update()
			writeJSON(w, http.StatusOK, n.Info())
			return
		}
		if (r.Method == http.MethodPost || r.Method == http.MethodDelete) && strings.HasPrefix(r.URL.Path, "/v1/sites/") {
			rest := strings.TrimPrefix(r.URL.Path, "/v1/sites/")
			if msg, hint, ok := n.refuse(strings.SplitN(rest, "/", 2)[0], rest); ok {
				api.WriteError(w, &api.Error{Status: http.StatusMisdirectedRequest, Code: api.CodeNotLeader, Message: msg, Hint: hint})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// refuse says why this instance may not make the change at path (under
// /v1/sites/) to site, and who may: the message and the hint of the 421
// answer. ok is false when this instance may make it.
func (n *Node) refuse(site, path string) (msg, hint string, ok bool) {
	info := n.Info()
	if !n.sharded {
		if info.Acting {
			return "", "", false
		}
		msg, hint = leaderRefusal(info, cliCommand(path))
		return msg, hint, true
	}
	n.mu.Lock()
	owned := n.owned[site] && !n.releasing[site]
	var ids []string
	urls := map[string]string{}
	for _, m := range n.members {
		ids = append(ids, m.ID)
		urls[m.ID] = m.URL
	}
	n.mu.Unlock()
	if owned && info.Acting {
		return "", "", false
	}
	owner := Assign(site, ids)
	msg, hint = ownerRefusal(info, site, Member{ID: owner, URL: urls[owner]}, cliCommand(path))
	return msg, hint, true
}

// cliCommand is the vigil command that sends the change at path (under
// /v1/sites/), ADDR standing for the instance's URL, for the hint.
func cliCommand(path string) string {
	parts := strings.Split(path, "/")
	switch {
	case len(parts) == 2 && parts[1] == "switch":
		return "vigil switch -address ADDR " + parts[0] + " LEVEL"
	case len(parts) == 2 && parts[1] == "drill":
		return "vigil drill -address ADDR " + parts[0]
	case len(parts) == 2 && parts[1] == "probe":
		return "vigil probe -address ADDR " + parts[0]
	case len(parts) == 4 && parts[1] == "origins":
		return "vigil origin " + parts[3] + " -address ADDR " + parts[0] + " " + parts[2]
	}
	return "vigil COMMAND -address ADDR ..."
}

// sendTo is the hint that names the instance to send the change to, with
// the CLI's flag and environment variable.
func sendTo(command, url string) string {
	return "send it there: " + strings.Replace(command, "ADDR", url, 1) + " (or set VIGIL_ADDR=" + url + ")"
}

const checkEtcd = "check etcd (etcdctl endpoint health) and this instance's control { store \"etcd\" { endpoints } }; GET /v1/cluster shows what this instance sees"

// leaderRefusal words the 421 of an instance that does not act in
// active/standby mode, from what it knows.
func leaderRefusal(info Info, command string) (msg, hint string) {
	l := info.Leader
	self := l != nil && l.ID == info.ID
	name := func() string {
		if self {
			return l.ID + " (this instance)"
		}
		return l.ID
	}
	if !info.Quorum {
		silent := "etcd has not answered this instance yet"
		if info.EtcdSeenAt != nil {
			silent = "etcd has not answered this instance for " + Ago(info.EtcdAge())
		}
		if l == nil {
			return fmt.Sprintf("no quorum: cannot confirm the leader and none was seen; %s, so it does not act", silent),
				"no change can be saved until etcd answers with a quorum: " + checkEtcd
		}
		msg = fmt.Sprintf("no quorum: cannot confirm the leader; last seen %s at %s %s ago (%s, so it does not act)",
			name(), l.URL, Ago(info.LeaderAge()), silent)
		if self {
			return msg, "this instance stopped acting when etcd stopped answering, and no instance can save a change until etcd has a quorum again: " + checkEtcd + "; then retry"
		}
		return msg, "if only this instance is cut off from etcd, the leader may still act: " + sendTo(command, l.URL) + "; if etcd has lost its quorum, no instance can save a change until it is back: " + checkEtcd
	}
	switch {
	case info.State == StateJoining:
		msg = "this instance is starting a new term in etcd and does not act yet"
		if l != nil && info.LeaderConfirmed && !self {
			return msg + fmt.Sprintf("; the leader is %s at %s", l.ID, l.URL), sendTo(command, l.URL)
		}
		return msg + "; retry in a few seconds", "GET /v1/cluster shows the leader once one is elected"
	case info.State == StateTakingOver:
		return "this instance was just elected leader and is reloading the state from etcd before it acts; retry in a few seconds",
			"retry here; GET /v1/cluster says \"acting\" once it is ready"
	case l == nil:
		return "this instance is a standby and no leader is elected now; retry in a few seconds",
			"GET /v1/cluster shows the leader once one is elected"
	case self:
		return "no leader acts now: etcd still names this instance, which lost its role (its election key goes with its lease, within lease_ttl); retry in a few seconds",
			"GET /v1/cluster shows the leader once one is elected"
	case info.LeaderConfirmed:
		return fmt.Sprintf("this instance is a standby; the leader is %s at %s", l.ID, l.URL), sendTo(command, l.URL)
	}
	return fmt.Sprintf("this instance is a standby and cannot confirm the leader; last seen %s at %s %s ago", l.ID, l.URL, Ago(info.LeaderAge())),
		"try the last leader seen: " + sendTo(command, l.URL) + "; GET /v1/cluster shows what this instance sees"
}

// ownerRefusal words the 421 of a sharded instance that may not change
// site, whose owner by the members last seen is owner.
func ownerRefusal(info Info, site string, owner Member, command string) (msg, hint string) {
	self := owner.ID == info.ID
	if !info.Quorum {
		silent := "etcd has not answered this instance yet"
		if info.EtcdSeenAt != nil {
			silent = "etcd has not answered this instance for " + Ago(info.EtcdAge())
		}
		switch {
		case owner.ID == "":
			return fmt.Sprintf("no quorum: cannot confirm the owner of site %s and no member was seen; %s, so it does not act", site, silent),
				"no change can be saved until etcd answers with a quorum: " + checkEtcd
		case self:
			return fmt.Sprintf("no quorum: cannot confirm the owner of site %s; by the members last seen it is this instance, which does not act (%s)", site, silent),
				"no instance can save a change until etcd has a quorum again: " + checkEtcd + "; then retry"
		}
		return fmt.Sprintf("no quorum: cannot confirm the owner of site %s; by the members last seen it is %s at %s (%s, so it does not act)", site, owner.ID, owner.URL, silent),
			"if only this instance is cut off from etcd, the owner may still act: " + sendTo(command, owner.URL) + "; if etcd has lost its quorum, no instance can save a change until it is back: " + checkEtcd
	}
	switch {
	case !info.Acting:
		msg = "this instance is starting a new term in etcd and does not act yet"
		if owner.ID != "" && !self {
			return msg + fmt.Sprintf("; site %s's owner is %s at %s", site, owner.ID, owner.URL), sendTo(command, owner.URL)
		}
		return msg + "; retry in a few seconds", "GET /v1/cluster says \"acting\" once it is ready"
	case owner.ID == "" || self:
		return fmt.Sprintf("site %s is being handed over to this instance; retry in a few seconds", site),
			"retry here; GET /v1/cluster lists the sites it owns"
	}
	return fmt.Sprintf("this instance does not own site %s; its owner is %s at %s", site, owner.ID, owner.URL), sendTo(command, owner.URL)
}

func writeJSON(w http.ResponseWriter, status int, v any) { api.WriteJSON(w, status, v) }
