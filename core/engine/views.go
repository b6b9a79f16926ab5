package engine

import (
	"sort"
	"strconv"
	"strings"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/vote"
	"github.com/vigilcdn/vigil/sdk"
)

// The read side's types are the API's (package api), so that the wire
// format has one definition.
type (
	// SiteView is one site as the API shows it.
	SiteView = api.SiteView
	// Thresholds are a site's health thresholds.
	Thresholds = api.Thresholds
	// OriginView is one origin of a SiteView.
	OriginView = api.OriginView
	// VoteView is one vote.
	VoteView = api.VoteView
)

// A site's Status, from worst to best (see package api).
const (
	StatusDown       = api.StatusDown
	StatusFailedOver = api.StatusFailedOver
	StatusDegraded   = api.StatusDegraded
	StatusPaused     = api.StatusPaused
	StatusUnknown    = api.StatusUnknown
	StatusOK         = api.StatusOK
)

// Statuses lists every Status value, for validating filters.
var Statuses = api.Statuses

// siteSnap is the immutable read-side copy of one site's state. A new one
// is made only when the site's state changes; rounds that change nothing
// share the old one.
type siteSnap struct {
	level    int
	hold     bool
	levels   []decide.Health
	origins  []originSnap
	probedAt int64  // the restored last probe, when no round record has the site
	probedSq uint64 // its round
	af       *antiflapSnap
	ramp     *rampSnap
}

type originSnap struct {
	state               decide.Health
	failures, successes int32
	originInfo
}

func snapOf(s *fleet.Site, x *siteInfo) *siteSnap {
	v := &siteSnap{
		level: s.State.Level, hold: s.State.ManualHold,
		levels:   append([]decide.Health(nil), s.Levels...),
		origins:  make([]originSnap, len(s.Spec.Origins)),
		probedAt: x.probedAt, probedSq: s.LastProbed, af: antiflapSnapOf(s),
		ramp: rampSnapOf(s),
	}
	for i := range v.origins {
		o := &s.State.Origins[i]
		v.origins[i] = originSnap{state: o.State, failures: o.Failures, successes: o.Successes, originInfo: x.origins[i]}
	}
	return v
}

// lastRef points at a site's entry in the round record of its last
// probed round; rec is nil before the first round since vigil started.
type lastRef struct {
	rec  *roundRecord
	site int32
}

// Views is an immutable read-side copy of every site, swapped in after
// each commit so that readers never wait for a round. Sites are in name
// order.
type Views struct {
	Round       uint64
	Publication uint64

	fleet *fleet.Fleet // only its immutable parts: names, specs, configs, chain
	sites []*siteSnap
	last  []lastRef
	// probeSeries is the largest fleet for which WriteMetrics writes the
	// per-vote series (vigil_probe_*, one per origin, source and voter, as
	// blackbox_exporter's probe_success is per target): control { metrics
	// { probe_series_sites } }. A larger fleet gets the per-origin series
	// only, so that a scrape stays a few lines per origin.
	probeSeries int
}

// Len is the number of sites.
func (v *Views) Len() int { return len(v.sites) }

// Index returns the position of the named site, or -1.
func (v *Views) Index(name string) int { return v.fleet.SiteIndex(name) }

// Has reports whether the named site exists.
func (v *Views) Has(name string) bool { return v.Index(name) >= 0 }

// Name returns the name of the site at position i.
func (v *Views) Name(i int) string { return v.fleet.Sites[i].Spec.Name }

// Names returns every site name in order (a new slice).
func (v *Views) Names() []string {
	out := make([]string, len(v.sites))
	for i := range out {
		out[i] = v.Name(i)
	}
	return out
}

// Site returns the named site's view, or nil. The view is built for the
// caller, who may keep it.
func (v *Views) Site(name string) *SiteView {
	i := v.Index(name)
	if i < 0 {
		return nil
	}
	return v.At(i)
}

// Seek returns the position of the first site whose name is greater
// than after (for paging).
func (v *Views) Seek(after string) int {
	return sort.Search(len(v.sites), func(i int) bool { return v.Name(i) > after })
}

// Status returns the one-word status of the site at position i without
// building its view.
func (v *Views) Status(i int) string {
	s, snap := v.fleet.Sites[i], v.sites[i]
	enabled := 0
	unhealthy := false
	for _, o := range snap.origins {
		if o.state != decide.Disabled {
			enabled++
		}
		unhealthy = unhealthy || o.state == decide.Unhealthy
	}
	cur := s.Spec.LevelIndex(snap.level)
	switch {
	case cur >= 0 && snap.levels[cur] == decide.Unhealthy:
		return StatusDown
	case snap.level != s.Spec.TopLevel():
		return StatusFailedOver
	case unhealthy:
		return StatusDegraded
	case !s.Spec.HealthCheck || enabled < 2:
		return StatusPaused
	case cur >= 0 && snap.levels[cur] == decide.Unknown:
		return StatusUnknown
	}
	return StatusOK
}

// Level returns the current level of the site at position i.
func (v *Views) Level(i int) int { return v.sites[i].level }

// At builds the view of the site at position i.
func (v *Views) At(i int) *SiteView {
	s, snap, last := v.fleet.Sites[i], v.sites[i], v.last[i]
	chain := v.fleet.Chain
	out := &SiteView{
		Round:             snap.probedSq,
		Site:              s.Spec.Name,
		Hostname:          s.Config.Hostname,
		Level:             snap.level,
		Failback:          s.Spec.Failback.String(),
		ManualHold:        snap.hold,
		EffectiveFailback: decide.EffectiveFailback(s.Spec, &decide.SiteState{ManualHold: snap.hold}).String(),
		Thresholds:        Thresholds{Unhealthy: s.Spec.UnhealthyThreshold, Healthy: s.Spec.HealthyThreshold},
		Levels:            make(map[string]string, len(s.Spec.Levels)),
		Origins:           make(map[string]OriginView, len(s.Spec.Origins)),
		Events:            []decide.Event{},
		Probing:           "active",
		Status:            v.Status(i),
		Publication:       v.Publication,
		Ramp:              rampView(snap.ramp),
	}
	probedAt := snap.probedAt
	var rs *roundSite
	if last.rec != nil {
		rs = &last.rec.sites[last.site]
		out.Round, probedAt = last.rec.seq, last.rec.at
		out.Events = append(out.Events, last.rec.events[rs.eventsFrom:rs.eventsTo]...)
	}
	if probedAt != 0 {
		t := timeOf(probedAt)
		out.LastProbe = &t
	}
	enabled := 0
	for _, o := range snap.origins {
		if o.state != decide.Disabled {
			enabled++
		}
	}
	switch {
	case !s.Spec.HealthCheck:
		out.Probing, out.PausedWhy = "paused", "health check disabled"
	case enabled < 2:
		out.Probing, out.PausedWhy = "paused", "fewer than two enabled origins"
	}
	for li, l := range s.Spec.Levels {
		out.Levels[strconv.Itoa(l)] = snap.levels[li].String()
	}
	for oi, o := range s.Spec.Origins {
		os := snap.origins[oi]
		ov := OriginView{
			State: os.state.String(), Failures: os.failures, Successes: os.successes, Verdict: "none", Asked: []string{}, Votes: []VoteView{},
			Level: o.Level, Address: s.Config.Origins[oi].Address, Reason: os.cause,
		}
		if os.since != 0 {
			t := timeOf(os.since)
			ov.Since = &t
		}
		if rs != nil && os.state != decide.Disabled {
			t := &last.rec.targets[rs.firstTarget+uint32(oi)]
			ov.Verdict = t.out.Verdict.String()
			ov.Asked = askedNames(chain, s.SourceList, t.out.Asked)
			if t.out.By >= 0 && int(t.out.By) < len(chain) {
				name := chain[t.out.By].Name
				ov.By = &name
			}
			votes := last.rec.votes[t.votesFrom:t.votesTo]
			for _, vr := range votes {
				ov.Votes = append(ov.Votes, vr.view(chain))
			}
			ov.Reason = reasonOf(t.out, votes, chain)
		}
		antiflapView(&ov, snap.af, oi)
		partitionView(&ov, last, oi)
		out.Origins[o.Name] = ov
	}
	return out
}

func askedNames(chain []fleet.ChainSource, sources []int, asked int8) []string {
	out := make([]string, 0, asked)
	for i := 0; i < int(asked) && i < len(sources); i++ {
		out = append(out, chain[sources[i]].Name)
	}
	return out
}

// voteRecord is one vote as a round record keeps it.
type voteRecord struct {
	voter   string
	detail  string
	latency int32 // microseconds
	source  uint8
	value   uint8 // sdk.Value
	reason  uint8 // sdk.Reason
}

func (r voteRecord) view(chain []fleet.ChainSource) VoteView {
	return VoteView{
		Source: chain[r.source].Name, Voter: r.voter, Value: sdk.Value(r.value).String(), Reason: sdk.Reason(r.reason).String(),
		Detail: r.detail, LatencyMS: float64(r.latency) / 1000,
	}
}

// reasonOf summarizes why an origin got its verdict: the settling source's
// votes that agree with the verdict, or every vote when none settled.
func reasonOf(out vote.Outcome, votes []voteRecord, chain []fleet.ChainSource) string {
	if len(votes) == 0 {
		return "no votes"
	}
	want, source := uint8(0), -1
	if out.By >= 0 {
		source = int(out.By)
		want = uint8(sdk.Down)
		if out.Verdict == vote.VerdictUp {
			want = uint8(sdk.Up)
		}
	}
	seen := map[string]int{}
	var keys []string
	for _, v := range votes {
		if source >= 0 && (int(v.source) != source || v.value != want) {
			continue
		}
		k := chain[v.source].Name + ": " + sdk.Reason(v.reason).String()
		if v.value == uint8(sdk.Abstain) {
			k = chain[v.source].Name + ": abstained: " + sdk.Reason(v.reason).String()
		}
		if v.value == uint8(sdk.Down) && v.detail != "" {
			k += " (" + v.detail + ")"
		}
		if seen[k] == 0 {
			keys = append(keys, k)
		}
		seen[k]++
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for j, k := range keys {
		if seen[k] > 1 {
			parts[j] = k + " x" + strconv.Itoa(seen[k])
		} else {
			parts[j] = k
		}
	}
	if out.By < 0 {
		return "unsettled: " + strings.Join(parts, "; ")
	}
	return strings.Join(parts, "; ")
}

// Views returns the current read-side views. Callers must not modify them.
func (e *Engine) Views() *Views { return e.views.Load() }
