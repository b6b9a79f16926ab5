package engine

import (
	"sort"
	"strconv"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
)

// SiteView is a site as the API shows it: the shape of a `vigil simulate`
// round line, plus the last probe time, each origin's last reason and votes,
// and the publication version.
type SiteView struct {
	Round    uint64                `json:"round"`
	Site     string                `json:"site"`
	Hostname string                `json:"hostname"`
	Level    int                   `json:"level"`
	Failback string                `json:"failback"`
	Levels   map[string]string     `json:"levels"`
	Origins  map[string]OriginView `json:"origins"`
	// Events are the events of the site's last probed round.
	Events []decide.Event `json:"events"`
	// LastProbe is when the site was last probed; null before the first.
	LastProbe *time.Time `json:"last_probe"`
	// Probing is "active", or "paused" with PausedWhy.
	Probing     string `json:"probing"`
	PausedWhy   string `json:"paused_why,omitempty"`
	Publication uint64 `json:"publication"`
}

// OriginView is one origin of a SiteView.
type OriginView struct {
	State   string   `json:"state"`
	Verdict string   `json:"verdict"`
	By      *string  `json:"by"`
	Asked   []string `json:"asked"`
	Level   int      `json:"level"`
	Address string   `json:"address"`
	// Reason summarizes the last round's votes, such as
	// "direct: connect_failed: connection refused".
	Reason string `json:"reason"`
	// Since is when State last changed.
	Since *time.Time `json:"since"`
	// Votes are every vote cast for the origin in the site's last round.
	Votes []VoteView `json:"votes"`
}

// VoteView is one vote.
type VoteView struct {
	Source    string  `json:"source"`
	Voter     string  `json:"voter"`
	Value     string  `json:"value"`
	Reason    string  `json:"reason"`
	Detail    string  `json:"detail,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
}

// Views is an immutable read-side copy of every site, swapped in after
// each round and action so readers never wait for a round.
type Views struct {
	Round       uint64
	Publication uint64
	Names       []string
	Sites       map[string]*SiteView
}

func (e *Engine) siteView(s *fleet.Site, x *siteExtra) *SiteView {
	v := &SiteView{
		Round:       x.lastRound,
		Site:        s.Spec.Name,
		Hostname:    s.Config.Hostname,
		Level:       s.State.Level,
		Failback:    decide.EffectiveFailback(s.Spec, s.State).String(),
		Levels:      make(map[string]string, len(s.Spec.Levels)),
		Origins:     make(map[string]OriginView, len(s.Spec.Origins)),
		Events:      append([]decide.Event{}, x.lastEvents...),
		Probing:     "active",
		Publication: e.meta.Publication,
	}
	if !x.lastProbedAt.IsZero() {
		t := x.lastProbedAt
		v.LastProbe = &t
	}
	switch {
	case !s.Spec.HealthCheck:
		v.Probing, v.PausedWhy = "paused", "health check disabled"
	case s.State.EnabledOrigins() < 2:
		v.Probing, v.PausedWhy = "paused", "fewer than two enabled origins"
	}
	for i, l := range s.Spec.Levels {
		v.Levels[strconv.Itoa(l)] = s.Levels[i].String()
	}
	for i, o := range s.Spec.Origins {
		st := s.State.Origins[i]
		ox := x.origin(o.Name)
		ov := OriginView{
			State: st.State.String(), Verdict: "none", Asked: []string{},
			Level: o.Level, Address: s.Config.Origins[i].Address, Reason: ox.reason,
			Votes: append([]VoteView{}, ox.votes...),
		}
		if !ox.since.IsZero() {
			t := ox.since
			ov.Since = &t
		}
		if st.State != decide.Disabled && x.lastRound != 0 {
			out := s.Outcomes[i]
			ov.Verdict = out.Verdict.String()
			ov.Asked = s.Asked(e.fleet.Chain, i)
			if out.By >= 0 && int(out.By) < len(e.fleet.Chain) {
				name := e.fleet.Chain[out.By].Name
				ov.By = &name
			}
		}
		v.Origins[o.Name] = ov
	}
	return v
}

// refreshViews rebuilds the views of the named sites (all when names is
// nil) and swaps them in. Called with e.mu held.
func (e *Engine) refreshViews(names []string) {
	old := e.views.Load()
	next := &Views{Round: e.fleet.Seq, Publication: e.meta.Publication, Sites: map[string]*SiteView{}}
	if old != nil && names != nil {
		for k, v := range old.Sites {
			next.Sites[k] = v
		}
	}
	if names == nil {
		for _, s := range e.fleet.Sites {
			next.Sites[s.Spec.Name] = e.siteView(s, e.extra(s.Spec.Name))
		}
	} else {
		for _, n := range names {
			if s := e.fleet.Site(n); s != nil {
				next.Sites[n] = e.siteView(s, e.extra(n))
			}
		}
		// The publication version is shown on every site.
		for k, v := range next.Sites {
			if v.Publication != e.meta.Publication {
				cp := *v
				cp.Publication = e.meta.Publication
				next.Sites[k] = &cp
			}
		}
	}
	for n := range next.Sites {
		next.Names = append(next.Names, n)
	}
	sort.Strings(next.Names)
	e.views.Store(next)
}

// Views returns the current read-side views. Callers must not modify them.
func (e *Engine) Views() *Views { return e.views.Load() }
