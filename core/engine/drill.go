package engine

// Failover drills (docs/drills.md): an operator's game day through the
// real decision path. For the drill's duration the drilled level's origins
// get a down verdict from the drill, a source of its own that settles them
// before the chain's: the chain is still asked as in any round, and its
// votes stay in the round record (shown, never counted), so the status and
// the history say what the real probes saw meanwhile. Everything after the
// verdicts is real: health, failover, the commit, the publication, the
// notices (marked as a drill) and the alerts (labelled drill="true").
//
// A drill is durable: it rides with the site's record in the store
// (store.SiteDrill), so it survives a restart, a reload and an HA
// takeover, and ends when its time is up whoever leads then.
//
// A drill ends at the first round after its time is up, on an abort, or
// when another level of the site really fails (the drill steps aside for
// the real failure, and the journal says so). After it ends the site's
// own failback applies (auto, ramp or manual); until the site is back on
// the level it was on when the drill started, its events stay marked as
// the drill's (the way back), unless a real failure took over.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/core/vote"
	"github.com/vigilcdn/vigil/sdk"
)

// MaxDrill is the longest drill accepted.
const MaxDrill = 24 * time.Hour

// DefaultDrill is a drill's duration when none is given.
const DefaultDrill = 5 * time.Minute

// drillState is a site's drill: running (ended zero), or ended and the
// site on its way back to fromLevel.
type drillState struct {
	level     int    // the drilled level
	fromLevel int    // the site's level when the drill started
	started   int64  // Unix nanoseconds
	until     int64  // Unix nanoseconds: the drill ends at the first round at or after it
	actor     string // who started it
	ended     int64  // Unix nanoseconds; 0 while it runs
	end       string // why it ended (decide.DrillEnd*)
}

func (d *drillState) running() bool { return d != nil && d.ended == 0 }

func (d *drillState) clone() *drillState {
	if d == nil {
		return nil
	}
	c := *d
	return &c
}

// drillChain appends the drill's own link to a fleet's chain: never
// walked (no site's sources include it), it is what the drill's verdicts
// are settled by, so that every reader of a round record names it.
func drillChain(f *fleet.Fleet) {
	f.Chain = append(f.Chain, fleet.ChainSource{Name: api.DrillSource})
}

// configChain is the engine fleet f's chain without the drill's link.
func configChain(f *fleet.Fleet) []fleet.ChainSource {
	return f.Chain[:len(f.Chain)-1]
}

// drillIndex is the drill's chain index in f (always the last).
func drillIndex(f *fleet.Fleet) int { return len(f.Chain) - 1 }

// drillSum adds the drill to a site's state fingerprint.
func drillSum(put func(uint64), x *siteInfo) {
	d := x.drill
	if d == nil {
		put(0)
		return
	}
	put(uint64(d.level) | uint64(d.fromLevel)<<32)
	put(uint64(d.started))
	put(uint64(d.until))
	put(uint64(d.ended))
	put(uint64(len(d.actor)) | uint64(len(d.end))<<32)
}

// drillRecord writes the drill into a site's record.
func drillRecord(x *siteInfo, r *store.Site) {
	d := x.drill
	if d == nil {
		return
	}
	r.Drill = &store.SiteDrill{Level: d.level, FromLevel: d.fromLevel, Started: timeOf(d.started), Until: timeOf(d.until),
		Actor: d.actor, Ended: timeOf(d.ended), End: d.end}
}

// drillSame reports whether r holds x's drill.
func drillSame(x *siteInfo, r *store.Site) bool {
	var want store.Site
	drillRecord(x, &want)
	if (want.Drill == nil) != (r.Drill == nil) {
		return false
	}
	if want.Drill == nil {
		return true
	}
	a, b := *want.Drill, *r.Drill
	return a.Level == b.Level && a.FromLevel == b.FromLevel && a.Started.Equal(b.Started) && a.Until.Equal(b.Until) &&
		a.Actor == b.Actor && a.Ended.Equal(b.Ended) && a.End == b.End
}

// drillRestore reads a site's drill from its record. A drill of a level
// the configuration no longer has is ended (level_gone) with an event.
func drillRestore(s *fleet.Site, x *siteInfo, r *store.Site) (events []decide.Event, changed bool) {
	if r.Drill == nil {
		return nil, false
	}
	d := r.Drill
	x.drill = &drillState{level: d.Level, fromLevel: d.FromLevel, started: nanos(d.Started), until: nanos(d.Until),
		actor: d.Actor, ended: nanos(d.Ended), end: d.End}
	if s.Spec.LevelIndex(d.Level) < 0 {
		if x.drill.running() {
			events = append(events, decide.Event{Kind: decide.KindDrillEnded, Level: d.Level, End: decide.DrillEndGone})
		}
		x.drill = nil
		return events, true
	}
	return nil, false
}

// drillRound is what a round's drill pass leaves for after Apply.
type drillRound struct {
	// sites are the fleet indices of the probed sites that had a drill
	// (running or on its way back) when the round started.
	sites []int
}

// drillVotesLocked runs before a round's verdicts are applied: it ends the
// drills whose time is up, then settles each running drill's origins down
// by the drill, keeping the chain's votes in the record. Called with e.mu
// held.
func (e *Engine) drillVotesLocked(f *fleet.Fleet, plan *fleet.Plan, asker *chainAsker, start time.Time) drillRound {
	var dr drillRound
	now := nanos(start)
	for i := range e.info {
		x := &e.info[i]
		if !x.drill.running() || now < x.drill.until {
			continue
		}
		if e.opts.Owns != nil && !e.opts.Owns(f.Sites[i].Spec.Name) {
			continue // sharded: the site's owner ends it
		}
		e.endDrillLocked(i, 0, decide.DrillEndTime, "", start)
	}
	if len(plan.Picked) == 0 {
		return dr
	}
	src := drillIndex(f)
	pos := e.posBuf
	for j, i := range plan.Picked {
		x := &e.info[i]
		if x.drill == nil || x.drill.started > now {
			continue // none, or started while this round's sources voted: from the next round on
		}
		dr.sites = append(dr.sites, i)
		if !x.drill.running() {
			continue
		}
		s := f.Sites[i]
		detail := e.intern.get("failover drill by " + x.drill.actor)
		outs := plan.Jobs[j].Outcomes
		for o := range outs {
			if outs[o].Skip || s.Spec.Origins[o].Level != x.drill.level {
				continue
			}
			outs[o].Verdict, outs[o].By = vote.VerdictDown, int8(src)
			asker.cast = append(asker.cast, castVote{target: pos[i] + int32(o), vote: voteRecord{
				voter: api.DrillSource, detail: detail, source: uint8(src), value: uint8(sdk.Down), reason: uint8(sdk.ReasonUnspecified),
			}})
		}
	}
	return dr
}

// drillMarkLocked runs after a round's verdicts are applied, before they
// are recorded and journaled: it marks the events of the sites that had a
// drill when the round started as the drill's. Called with e.mu held.
func (e *Engine) drillMarkLocked(dr drillRound, reports []fleet.Report) {
	if len(dr.sites) == 0 {
		return
	}
	for _, rep := range reports {
		if !slices.Contains(dr.sites, rep.Index) {
			continue
		}
		for k := range rep.Events {
			rep.Events[k].Drill = true
		}
	}
}

// drillAfterLocked runs after a round's verdicts are applied and
// recorded: it ends a running drill when another level of its site really
// failed, and forgets an ended drill once its site is back where it
// started (or a real failure took over). Called with e.mu held.
func (e *Engine) drillAfterLocked(dr drillRound, reports []fleet.Report, round uint64, start time.Time) {
	if len(dr.sites) == 0 {
		return
	}
	for _, rep := range reports {
		i := rep.Index
		if !slices.Contains(dr.sites, i) || e.info[i].drill == nil {
			continue
		}
		d, s := e.info[i].drill, rep.Site
		if failed := realFailure(s, d.level, rep.Events); failed != 0 {
			if d.running() {
				e.endDrillLocked(i, round, decide.DrillEndSteppedAside, fmt.Sprintf("level %d really failed", failed), start)
				e.log.Warn("drill stepped aside: another level of the site really failed", "site", s.Spec.Name, "drilled_level", d.level, "failed_level", failed)
			}
			e.info[i].drill = nil // a real failure now: its events are not the drill's
			e.touch(i)
			continue
		}
		if d.running() {
			continue
		}
		switch {
		case s.State.Level == d.fromLevel: // back where it started: the drill is over
		case realDown(s, d.level): // the drilled level really fails now: not the drill's any more
			e.log.Warn("after the drill, the drilled level has real down verdicts: what follows is not marked as the drill's", "site", s.Spec.Name, "level", d.level)
		default:
			continue
		}
		e.info[i].drill = nil
		e.touch(i)
	}
}

// realDown reports whether an origin of level got a real down verdict
// this round (called once the drill no longer votes).
func realDown(s *fleet.Site, level int) bool {
	for o, out := range s.Outcomes {
		if s.Spec.Origins[o].Level == level && !out.Skip && out.Verdict == vote.VerdictDown {
			return true
		}
	}
	return false
}

// realFailure is the level other than drilled that the round's events
// made unhealthy (an origin of it turned unhealthy and the level is
// unhealthy now), 0 for none.
func realFailure(s *fleet.Site, drilled int, events []decide.Event) int {
	for _, ev := range events {
		if ev.Kind != decide.KindOriginState || ev.To != decide.Unhealthy {
			continue
		}
		oi := s.Spec.OriginIndex(ev.Origin)
		if oi < 0 {
			continue
		}
		l := s.Spec.Origins[oi].Level
		if li := s.Spec.LevelIndex(l); l != drilled && li >= 0 && li < len(s.Levels) && s.Levels[li] == decide.Unhealthy {
			return l
		}
	}
	return 0
}

// endDrillLocked ends site i's running drill: journaled (drill_ended) and
// marked for writing. Called with e.mu held.
func (e *Engine) endDrillLocked(i int, round uint64, why, detail string, at time.Time) {
	x := &e.info[i]
	d := x.drill.clone()
	d.ended, d.end = nanos(at), why
	x.drill = d
	name := e.fleet.Sites[i].Spec.Name
	e.addEvent(name, round, "", decide.Event{Kind: decide.KindDrillEnded, Level: d.level, End: why}, at)
	e.log.Info("drill ended", "site", name, "level", d.level, "end", why, "detail", detail)
	e.touch(i)
}

// DrillRequest is a drill to start: Level 0 is the site's current level,
// For 0 is DefaultDrill.
type DrillRequest struct {
	Level int
	For   time.Duration
}

// drillRefusal is a drill refused for a reason the operator can fix.
func drillRefusal(code, hint, format string, args ...any) *ActionError {
	return &ActionError{Code: code, Hint: hint, Err: fmt.Errorf(format, args...)}
}

// StartDrill starts a failover drill of site (docs/drills.md), journaled
// as drill_started with actor, and committed before it answers. It is
// refused, with an *ActionError naming the problem and the way out, for
// an unknown site or level, a bad duration, a drill already running (or
// its way back not finished), a site whose health checks are paused, a
// site held by a manual switch, or one with no other healthy level to
// fail over to.
func (e *Engine) StartDrill(ctx context.Context, site string, req DrillRequest, actor string) (api.Drill, error) {
	if req.For == 0 {
		req.For = DefaultDrill
	}
	var out api.Drill
	_, err := e.act(ctx, site, actor, func(f *fleet.Fleet) ([]decide.Event, error) {
		if req.For < 0 || req.For > MaxDrill {
			return nil, drillRefusal("bad_duration", "give a duration such as -for 5m (the API's \"for\": \"5m\"), at most "+MaxDrill.String(),
				"site %s: a drill of %s is refused: the duration must be more than 0 and at most %s", site, req.For, MaxDrill)
		}
		i := f.SiteIndex(site)
		if i < 0 {
			return nil, fleet.ErrUnknownSite{Name: site}
		}
		s, x := f.Sites[i], &e.info[i]
		for _, c := range configChain(f) {
			if c.Name == api.DrillSource {
				return nil, drillRefusal("drill_source_name", "rename the source block \""+api.DrillSource+"\" in the configuration",
					"site %s: a source of the configuration is named %q, the name the drill's votes are cast under", site, api.DrillSource)
			}
		}
		level := req.Level
		if level == 0 {
			level = s.State.Level
		}
		if s.Spec.LevelIndex(level) < 0 {
			return nil, drillRefusal("unknown_level", "give -level one of them (the API's \"level\"), or none for the current level",
				"site %s has no level %d (its levels are %s)", site, level, levelList(s.Spec.Levels))
		}
		if d := x.drill; d != nil {
			if d.running() {
				return nil, drillRefusal("drill_running", fmt.Sprintf("wait for it to end (%s), or abort it: vigil drill -abort %s", timeOf(d.until).Format(time.RFC3339), site),
					"site %s: a drill of level %d is already running, started by %s", site, d.level, d.actor)
			}
			return nil, drillRefusal("drill_running", fmt.Sprintf("wait for the site's failback to level %d, or switch it back: vigil switch %s %d", d.fromLevel, site, d.fromLevel),
				"site %s: the last drill ended but the site is not back on level %d yet", site, d.fromLevel)
		}
		if !s.Eligible() {
			why := "its health check is disabled"
			if s.Spec.HealthCheck {
				why = "it has fewer than two enabled origins"
			}
			return nil, drillRefusal("site_paused", "a drill needs the site's rounds: enable its health check and at least two origins, then retry",
				"site %s: its health checks are paused (%s), so a drill could not run", site, why)
		}
		if s.State.ManualHold {
			return nil, drillRefusal("manual_hold", fmt.Sprintf("release the hold first with vigil switch %s %d (its top level), then retry", site, s.Spec.TopLevel()),
				"site %s is held on level %d by a manual switch: a drill's failover could not move it", site, s.State.Level)
		}
		target := 0
		for li, l := range s.Spec.Levels {
			if l != level && li < len(s.Levels) && s.Levels[li] == decide.Healthy {
				target = l
				break
			}
		}
		if target == 0 {
			return nil, drillRefusal("no_healthy_level", "bring a backup level to healthy first (vigil status "+site+" shows each level's health)",
				"site %s has no healthy level besides level %d to fail over to: a drill now would leave it with nowhere to go", site, level)
		}
		now := e.opts.Now()
		d := &drillState{level: level, fromLevel: s.State.Level, started: nanos(now), until: nanos(now.Add(req.For)), actor: actor}
		x.drill = d
		out = drillView(s, d)
		return []decide.Event{{Kind: decide.KindDrillStarted, Level: level, Seconds: int(req.For.Round(time.Second) / time.Second)}}, nil
	})
	if err != nil {
		return api.Drill{}, err
	}
	e.log.Info("drill started", "site", site, "level", out.Level, "for", req.For, "actor", actor)
	return out, nil
}

// AbortDrill ends site's running drill now (drill_ended, aborted), from
// which the site's failback applies. A site with no drill running is
// refused with code "no_drill".
func (e *Engine) AbortDrill(ctx context.Context, site, actor string) (api.Drill, error) {
	var out api.Drill
	_, err := e.act(ctx, site, actor, func(f *fleet.Fleet) ([]decide.Event, error) {
		i := f.SiteIndex(site)
		if i < 0 {
			return nil, fleet.ErrUnknownSite{Name: site}
		}
		x := &e.info[i]
		if !x.drill.running() {
			return nil, drillRefusal("no_drill", "vigil events -site "+site+" shows the drills that ran",
				"site %s has no drill running", site)
		}
		d := x.drill.clone()
		d.ended, d.end = nanos(e.opts.Now()), decide.DrillEndAborted
		x.drill = d
		out = drillView(f.Sites[i], d)
		return []decide.Event{{Kind: decide.KindDrillEnded, Level: d.level, End: decide.DrillEndAborted}}, nil
	})
	if err != nil {
		return api.Drill{}, err
	}
	e.log.Info("drill aborted", "site", site, "actor", actor)
	return out, nil
}

// ErrNoDrill is returned by Views.Drill for a site with no drill.
var ErrNoDrill = errors.New("no drill")

// Drill returns site's drill, running or on its way back, as of the
// latest commit; ErrNoDrill when it has none, fleet.ErrUnknownSite when
// there is no such site.
func (v *Views) Drill(site string) (api.Drill, error) {
	i := v.Index(site)
	if i < 0 {
		return api.Drill{}, fleet.ErrUnknownSite{Name: site}
	}
	d := v.sites[i].drill
	if d == nil {
		return api.Drill{}, ErrNoDrill
	}
	return drillView(v.fleet.Sites[i], d), nil
}

func drillView(s *fleet.Site, d *drillState) api.Drill {
	out := api.Drill{Site: s.Spec.Name, Level: d.level, FromLevel: d.fromLevel, Started: timeOf(d.started), Until: timeOf(d.until),
		Actor: d.actor, Running: d.running(), Ended: timeOf(d.ended), End: d.end}
	for _, o := range s.Spec.Origins {
		if o.Level == d.level {
			out.Origins = append(out.Origins, o.Name)
		}
	}
	return out
}

func levelList(levels []int) string {
	s := make([]string, len(levels))
	for i, l := range levels {
		s[i] = fmt.Sprint(l)
	}
	return strings.Join(s, ", ")
}
