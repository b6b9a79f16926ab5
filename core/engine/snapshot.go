package engine

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/readmodel"
	"github.com/vigilcdn/vigil/core/vote"
	"github.com/vigilcdn/vigil/sdk"
)

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
	drill    *drillState // a copy (drill.go)
	dwell    int64       // decide.DwellUntil: the failback dwell's end, 0 for none
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
		ramp: rampSnapOf(s), drill: x.drill.clone(), dwell: decide.DwellUntil(s.Spec, s.State),
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

// Views is an immutable snapshot of every site, swapped in after each
// commit so that readers never wait for a round: the API's read model
// (core/readmodel) builds its views from it through Fill, and the metrics,
// alerts and history read it here. Sites are in name order.
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
	// auto is sites_per_round = "auto" and roundSize the size of the
	// last round planned (0: none yet), for the summary's cycle.
	auto      bool
	roundSize int
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

// Seek returns the position of the first site whose name is greater
// than after (for paging).
func (v *Views) Seek(after string) int {
	return sort.Search(len(v.sites), func(i int) bool { return v.Name(i) > after })
}

// Level returns the current level of the site at position i.
func (v *Views) Level(i int) int { return v.sites[i].level }

// Commit returns the round and the publication version of the commit the
// snapshot was taken after.
func (v *Views) Commit() (round, publication uint64) { return v.Round, v.Publication }

// Site builds the named site's API view with the read model
// (readmodel.SiteView), or returns nil: a shorthand for the engine's
// callers and tests.
func (v *Views) Site(name string) *api.SiteView { return readmodel.SiteView(v, name) }

// State sets out to the state of the site at position i
// (readmodel.Snapshot), reusing out's slice. Levels is shared with the
// snapshot.
func (v *Views) State(i int, out *readmodel.SiteState) {
	s, snap := v.fleet.Sites[i], v.sites[i]
	origins := out.Origins[:0]
	for _, o := range snap.origins {
		origins = append(origins, readmodel.OriginState{State: o.state, Failures: o.failures, Successes: o.successes})
	}
	*out = readmodel.SiteState{Spec: s.Spec, Level: snap.level, ManualHold: snap.hold, Levels: snap.levels, Origins: origins}
}

// Fill sets out to the whole site at position i (readmodel.Snapshot):
// its state, and the last round's events and votes. Levels and Events
// are shared with the snapshot.
func (v *Views) Fill(i int, out *readmodel.Site) {
	v.State(i, &out.SiteState)
	s, snap, last := v.fleet.Sites[i], v.sites[i], v.last[i]
	out.Hostname = s.Config.Hostname
	out.Round, out.ProbedAt, out.Probed, out.Events, out.Ramp = snap.probedSq, timeOf(snap.probedAt), false, nil, rampOf(snap.ramp)
	out.DwellUntil, out.Drill = waitFill(snap)
	var rs *roundSite
	votes := 0
	if last.rec != nil {
		rs = &last.rec.sites[last.site]
		out.Round, out.ProbedAt, out.Probed = last.rec.seq, timeOf(last.rec.at), true
		out.Events = last.rec.events[rs.eventsFrom:rs.eventsTo:rs.eventsTo]
		for oi := range snap.origins {
			t := &last.rec.targets[rs.firstTarget+uint32(oi)]
			votes += int(t.votesTo - t.votesFrom)
		}
	}
	out.Details = make([]readmodel.Origin, len(snap.origins))
	all := make([]readmodel.Vote, 0, votes) // one array for the site's votes
	chain := v.fleet.Chain
	for oi := range out.Details {
		o, os := &out.Details[oi], &snap.origins[oi]
		o.Address, o.Cause, o.Since = s.Config.Origins[oi].Address, os.cause, timeOf(os.since)
		if rs != nil {
			t := &last.rec.targets[rs.firstTarget+uint32(oi)]
			o.Verdict = t.out.Verdict
			o.Asked = askedNames(chain, s.SourceList, t.out.Asked)
			if t.out.By >= 0 && int(t.out.By) < len(chain) {
				o.By = chain[t.out.By].Name
			}
			recs := last.rec.votes[t.votesFrom:t.votesTo]
			from := len(all)
			for _, vr := range recs {
				all = append(all, vr.vote(chain))
			}
			o.Votes = all[from:len(all):len(all)]
			o.Reason = reasonOf(t.out, recs, chain)
		}
		antiflapFill(o, snap.af, oi)
		partitionFill(o, last, oi)
	}
}

var _ readmodel.Snapshot = (*Views)(nil)

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
	// plugin is the vote's plugin reason, numbered by theReasons (0:
	// none): one byte, in what was the record's padding.
	plugin uint8
	// http is what an HTTP check saw (sdk.Vote's HTTP), nil when the
	// source sent none: the vigil_probe_http_* series (metrics_sites.go).
	http *sdk.HTTPProbe
}

// vote is the vote in the read model's terms.
func (r voteRecord) vote(chain []fleet.ChainSource) readmodel.Vote {
	return readmodel.Vote{
		Source: chain[r.source].Name, Voter: r.voter, Value: sdk.Value(r.value), Reason: sdk.Reason(r.reason),
		PluginReason: theReasons.name(r.plugin), Detail: r.detail, Latency: time.Duration(r.latency) * time.Microsecond,
	}
}

// view is the vote as the API shows it (a probe's answer).
func (r voteRecord) view(chain []fleet.ChainSource) api.VoteView {
	return readmodel.VoteView(r.vote(chain))
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
		if v.value == uint8(sdk.Down) {
			// The plugin reason before the detail, as operators read it:
			// "tlscheck/cert_expiring: expires in 3 days".
			if pr := theReasons.name(v.plugin); pr != "" && v.detail != "" {
				k += " (" + pr + ": " + v.detail + ")"
			} else if pr != "" {
				k += " (" + pr + ")"
			} else if v.detail != "" {
				k += " (" + v.detail + ")"
			}
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

// Views returns the snapshot of the latest commit: lock-free, never
// waiting for a round. Callers must not modify it.
func (e *Engine) Views() *Views { return e.views.Load() }
