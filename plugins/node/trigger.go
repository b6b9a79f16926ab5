package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/sdk"
)

// The passive trigger's bounds on the gateway: origins read from one
// PassiveReport, (site, origin) pairs remembered from the ballots, how
// long one is remembered without a ballot naming it, and the suspects
// queued for each of vigil's streams.
const (
	maxReportOrigins = 64
	maxTriggerRefs   = 100000
	refForget        = time.Hour
	suspectQueue     = 64
)

// ref names one origin of one site.
type ref struct{ site, origin string }

// triggers is the gateway's side of the passive trigger: which sites an
// origin address belongs to (learned from the ballots), what was reported
// lately, and vigil's suspect streams (sdk.SuspectReporter).
type triggers struct {
	log hclog.Logger
	now func() time.Time

	mu          sync.Mutex
	byAddr      map[string]map[ref]time.Time // address -> its (site, origin) -> last in a ballot
	refs        int
	pruned      time.Time
	lastDown    map[ref]time.Time    // when the trigger last found the origin down
	lastSuspect map[string]time.Time // when the site was last reported
	watchers    map[chan sdk.Suspect]context.Context

	// Counted since the last log line (at most one per suspect_interval).
	lastLog                              time.Time
	reports, downs, suspects, held, lost int
	sites                                map[string]bool
}

func newTriggers(log hclog.Logger, now func() time.Time) *triggers {
	return &triggers{log: log, now: now, byAddr: map[string]map[ref]time.Time{}, lastDown: map[ref]time.Time{},
		lastSuspect: map[string]time.Time{}, watchers: map[chan sdk.Suspect]context.Context{}, sites: map[string]bool{}}
}

// learn remembers which (site, origin) each target's address is.
func (tr *triggers) learn(targets []sdk.Target) {
	now := tr.now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for i := range targets {
		t := &targets[i]
		m := tr.byAddr[t.Address]
		if m == nil {
			if tr.refs >= maxTriggerRefs {
				continue
			}
			m = map[ref]time.Time{}
			tr.byAddr[t.Address] = m
		}
		r := ref{t.Site, t.Origin}
		if _, ok := m[r]; !ok {
			if tr.refs >= maxTriggerRefs {
				continue
			}
			tr.refs++
		}
		m[r] = now
	}
	if now.Sub(tr.pruned) < time.Minute {
		return
	}
	tr.pruned = now
	for addr, m := range tr.byAddr {
		for r, seen := range m {
			if now.Sub(seen) > refForget {
				delete(m, r)
				tr.refs--
			}
		}
		if len(m) == 0 {
			delete(tr.byAddr, addr)
		}
	}
}

// report judges a node's PassiveReport by rule and reports as suspects the
// sites of the origins it finds down, unless the origin was found down,
// or its site reported, within interval. eligible says whether the node
// may judge a site (its site_labels).
func (tr *triggers) report(node string, rep *pb.PassiveReport, rule passiveRule, interval time.Duration, eligible func(site string) bool) {
	origins := rep.GetOrigins()
	if len(origins) > maxReportOrigins {
		origins = origins[:maxReportOrigins]
	}
	voter := node + PassiveSuffix
	now := tr.now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.reports++
	for _, o := range origins {
		refs := tr.byAddr[o.GetAddress()]
		for _, r := range slices.SortedFunc(maps.Keys(refs), func(a, b ref) int {
			if a.site != b.site {
				return strings.Compare(a.site, b.site)
			}
			return strings.Compare(a.origin, b.origin)
		}) {
			if !eligible(r.site) {
				continue
			}
			v := rule.vote(&sdk.Target{Site: r.site, Origin: r.origin}, voter, o.GetPassive())
			if v.Value != sdk.Down {
				continue
			}
			tr.downs++
			if at, ok := tr.lastDown[r]; ok && now.Sub(at) < interval {
				tr.held++ // already said down for this origin
				continue
			}
			tr.lastDown[r] = now
			if at, ok := tr.lastSuspect[r.site]; ok && now.Sub(at) < interval {
				tr.held++ // the site was reported a moment ago
				continue
			}
			tr.lastSuspect[r.site] = now
			tr.suspects++
			tr.sites[r.site] = true
			tr.emitLocked(sdk.Suspect{Site: r.site, Origin: r.origin, Detail: fmt.Sprintf("node %s's real traffic: %s", node, v.Detail)})
		}
	}
	tr.logLocked(now, interval)
}

// flush logs what the trigger did since its last line, if that line is
// older than interval: the gateway calls it every round, so that the
// last reports of a burst are not left unlogged until the next one.
func (tr *triggers) flush(interval time.Duration) {
	now := tr.now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.logLocked(now, interval)
}

// emitLocked hands a suspect to each of vigil's streams, without waiting:
// a stream whose queue is full loses it (counted).
func (tr *triggers) emitLocked(s sdk.Suspect) {
	for ch, ctx := range tr.watchers {
		if ctx.Err() != nil {
			continue
		}
		select {
		case ch <- s:
		default:
			tr.lost++
		}
	}
}

// logLocked writes what the trigger did since the last line, at most once
// per interval, and forgets what interval made irrelevant.
func (tr *triggers) logLocked(now time.Time, interval time.Duration) {
	if now.Sub(tr.lastLog) < interval || tr.reports == 0 {
		return
	}
	if tr.suspects > 0 || tr.held > 0 || tr.lost > 0 {
		tr.log.Info("passive trigger: nodes reported real traffic failing between rounds (this line comes at most once per suspect_interval)",
			"reports", tr.reports, "down", tr.downs, "sites_suspected", slices.Sorted(maps.Keys(tr.sites)), "held_back", tr.held,
			"lost", tr.lost, "interval", interval.String())
	} else {
		tr.log.Debug("passive trigger: reports judged, none down", "reports", tr.reports, "interval", interval.String())
	}
	tr.lastLog = now
	tr.reports, tr.downs, tr.suspects, tr.held, tr.lost = 0, 0, 0, 0, 0
	clear(tr.sites)
	for r, at := range tr.lastDown {
		if now.Sub(at) >= interval {
			delete(tr.lastDown, r)
		}
	}
	for s, at := range tr.lastSuspect {
		if now.Sub(at) >= interval {
			delete(tr.lastSuspect, s)
		}
	}
}

// watch registers one of vigil's suspect streams until ctx ends.
func (tr *triggers) watch(ctx context.Context) <-chan sdk.Suspect {
	ch := make(chan sdk.Suspect, suspectQueue)
	tr.mu.Lock()
	tr.watchers[ch] = ctx
	tr.mu.Unlock()
	go func() {
		<-ctx.Done()
		tr.mu.Lock()
		delete(tr.watchers, ch)
		tr.mu.Unlock()
	}()
	return ch
}

// Suspects implements sdk.SuspectReporter: the sites of origins whose real
// traffic, as a node's passive window shows it, turned bad between rounds
// (passive_trigger). The channel is never closed; nothing is sent on it
// once ctx is done.
func (s *Source) Suspects(ctx context.Context) <-chan sdk.Suspect { return s.trig.watch(ctx) }

// passiveReport handles a node's PassiveReport.
func (s *Source) passiveReport(c *conn, rep *pb.PassiveReport) {
	st := s.settings()
	if !st.trigger || !c.passive {
		return // the gateway did not ask for it (an old welcome) or the node keeps no windows
	}
	if !sdk.ValidVoter(c.id + PassiveSuffix) {
		return // no passive votes for such a node either
	}
	rule := passiveRule{minRequests: st.passiveMinRequests, failureRatio: st.passiveFailureRatio}
	s.trig.report(c.id, rep, rule, st.suspectInterval, func(site string) bool { return st.siteLabels[site].Matches(c.labels) })
}
