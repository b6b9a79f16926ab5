package ha

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// Info is GET /v1/cluster.
type Info struct {
	ID   string `json:"id"`
	URL  string `json:"url"`
	Mode string `json:"mode"`
	// Role is "leader", "standby" or "shard".
	Role string `json:"role"`
	// Acting is whether this instance runs rounds and accepts actions now.
	Acting bool `json:"acting"`
	// Leader runs the rounds (active/standby) and delivers notifications.
	Leader     *Member  `json:"leader"`
	Members    []Member `json:"members"`
	OwnedSites int      `json:"owned_sites"`
	// Owned lists the owned sites when sharded.
	Owned []string `json:"owned,omitempty"`
	// Etcd is "ok" or why this instance cannot use etcd.
	Etcd string `json:"etcd"`
}

// Info describes this instance's place in the cluster.
func (n *Node) Info() Info {
	n.mu.Lock()
	defer n.mu.Unlock()
	valid := n.leaseValid()
	info := Info{ID: n.opts.ID, URL: n.opts.URL, Mode: n.opts.Config.Mode, Members: append([]Member{}, n.members...), Etcd: "ok"}
	if n.lastErr != "" || !valid {
		info.Etcd = "unreachable: " + n.lastErr
		if n.lastErr == "" {
			info.Etcd = "no lease yet"
		}
	}
	switch {
	case n.sharded && valid:
		info.Role, info.Acting = RoleShard, true
		for s := range n.owned {
			info.Owned = append(info.Owned, s)
		}
		sort.Strings(info.Owned)
		info.OwnedSites = len(info.Owned)
	case !n.sharded && n.ready && valid:
		info.Role, info.Acting = RoleLeader, true
		if n.eng != nil {
			if v := n.eng.Views(); v != nil {
				info.OwnedSites = v.Len()
			}
		}
	default:
		info.Role = RoleStandby
		if n.sharded {
			info.Role = RoleShard
		}
	}
	if n.leader.ID != "" {
		l := n.leader
		info.Leader = &l
	}
	return info
}

// Handler serves GET /v1/cluster and answers a change sent to an
// instance that may not make it (a standby; a shard that does not own
// the site) with 421 and the instance to send it to. It passes everything
// else to next.
func (n *Node) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cluster" && r.Method == http.MethodGet {
			n.metrics.update()
			writeJSON(w, http.StatusOK, n.Info())
			return
		}
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/sites/") {
			if msg, ok := n.refuse(strings.SplitN(strings.TrimPrefix(r.URL.Path, "/v1/sites/"), "/", 2)[0]); ok {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusMisdirectedRequest)
				_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
					"code": "not_leader", "message": msg,
					"hint": "send the change to that instance (vigil -addr URL ...); GET /v1/cluster shows the cluster",
				}})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// refuse says why this instance may not change site, and who may.
func (n *Node) refuse(site string) (string, bool) {
	info := n.Info()
	if !n.sharded {
		if info.Acting {
			return "", false
		}
		if info.Leader == nil {
			return "this instance is a standby and no leader is elected now; retry in a few seconds", true
		}
		return fmt.Sprintf("this instance is a standby; the leader is %s at %s", info.Leader.ID, info.Leader.URL), true
	}
	n.mu.Lock()
	owned := n.owned[site]
	var ids []string
	urls := map[string]string{}
	for _, m := range n.members {
		ids = append(ids, m.ID)
		urls[m.ID] = m.URL
	}
	n.mu.Unlock()
	if owned && info.Acting {
		return "", false
	}
	owner := Assign(site, ids)
	if owner == "" || owner == n.opts.ID {
		return fmt.Sprintf("site %s is being handed over to this instance; retry in a few seconds", site), true
	}
	return fmt.Sprintf("this instance does not own site %s; its owner is %s at %s", site, owner, urls[owner]), true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
