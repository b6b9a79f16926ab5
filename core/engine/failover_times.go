package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/failoverreport"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/vote"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// failoverTimes times each failover for its report (package
// failoverreport): the engine tells it of each origin's verdicts (the
// first failed round of a run of failures), of each failover it decides,
// of each commit and of each publication; the API hands it the nodes'
// acknowledgements. Reports complete are journaled as failover_timed
// events by the next commit.
type failoverTimes struct {
	tracker *failoverreport.Tracker
	// failing is, per origin failing now, the start of the first round
	// of its run of failed verdicts (Unix nanoseconds). In memory only:
	// after a restart the first failure of a run under way is unknown.
	failing map[originKey]int64
}

type originKey struct{ site, origin string }

func newFailoverTimes(reg prometheus.Registerer) *failoverTimes {
	return &failoverTimes{tracker: failoverreport.New(failoverreport.Options{Registerer: reg}), failing: map[originKey]int64{}}
}

// times returns the engine's failover timer, made at first use.
func (e *Engine) times() *failoverTimes {
	e.ftOnce.Do(func() { e.ft = newFailoverTimes(e.opts.Registerer) })
	return e.ft
}

// noteVerdict follows an origin's run of failed verdicts: a round that
// judged it down starts one (unless one is under way), a round that
// judged it up ends it; a round without a verdict leaves it. Called with
// e.mu held, for every origin of a probed site.
func (e *Engine) noteVerdict(s *fleet.Site, origin int, v vote.Verdict, at int64) {
	ft := e.times()
	switch v {
	case vote.VerdictDown:
		k := originKey{s.Spec.Name, s.Spec.Origins[origin].Name}
		if _, ok := ft.failing[k]; !ok {
			ft.failing[k] = at
		}
	case vote.VerdictUp:
		if len(ft.failing) > 0 {
			delete(ft.failing, originKey{s.Spec.Name, s.Spec.Origins[origin].Name})
		}
	}
}

// noteSwitch opens the report of a failover journaled as event seq:
// siteEvents are the round's events of the site, at the round's start.
// Called with e.mu held.
func (e *Engine) noteSwitch(s *fleet.Site, ev decide.Event, siteEvents []decide.Event, seq, round uint64, at int64) {
	if ev.Kind != decide.KindLevelSwitched || ev.Reason != decide.ReasonFailover {
		return
	}
	ft := e.times()
	// The origin that made the level unhealthy: of the level's origins
	// that turned unhealthy this round, the one whose run of failures
	// began first; when none did, of the level's origins failing now.
	turned := map[string]bool{}
	for _, x := range siteEvents {
		if x.Kind == decide.KindOriginState && x.To == decide.Unhealthy {
			turned[x.Origin] = true
		}
	}
	origin, first := "", int64(0)
	pick := func(onlyTurned bool) {
		for _, o := range s.Spec.Origins {
			if o.Level != ev.FromLevel || onlyTurned && !turned[o.Name] {
				continue
			}
			since, ok := ft.failing[originKey{s.Spec.Name, o.Name}]
			switch {
			case ok && (first == 0 || since < first):
				origin, first = o.Name, since
			case !ok && onlyTurned && origin == "":
				origin = o.Name // its run began before this engine started
			}
		}
	}
	if pick(true); origin == "" {
		pick(false)
	}
	sw := failoverreport.Switch{Site: s.Spec.Name, FromLevel: ev.FromLevel, ToLevel: ev.ToLevel, Drill: ev.Drill,
		Seq: seq, Round: round, RoundStarted: timeOf(at), Origin: origin, Decided: e.opts.Now()}
	if first != 0 {
		sw.FirstFailure = timeOf(first)
	}
	ft.tracker.Decided(sw)
}

// failoversCommitted says the pending failovers are saved. Called with
// e.mu held, right after a commit.
func (e *Engine) failoversCommitted() { e.times().tracker.Committed(e.opts.Now()) }

// failoversPublished says the publication carries the committed
// failovers, handed to the nodes at at (taken just before, so that no
// node can have it earlier). Called with e.mu held, after the commit's
// publication.
func (e *Engine) failoversPublished(at time.Time) {
	e.times().tracker.Published(e.meta.Publication, at)
}

// journalFailoverReports adds the reports completed by now to what the
// next commit journals. Called with e.mu held, before a commit.
func (e *Engine) journalFailoverReports() {
	ft := e.times()
	now := e.opts.Now()
	ft.tracker.Tick(now)
	for _, rep := range ft.tracker.Take() {
		b, err := json.Marshal(rep)
		if err != nil {
			e.log.Error("cannot encode a failover report; it is not journaled", "site", rep.Site, "error", err)
			continue
		}
		e.addEvent(rep.Site, rep.Round, "", decide.Event{Kind: decide.KindFailoverTimed, Drill: rep.Drill, Report: string(b)}, now)
	}
}

// FailoverApplied takes a node's acknowledgement of a publication version
// (POST /v1/publication/applied) into the failover reports.
func (e *Engine) FailoverApplied(a publication.Applied) { e.times().tracker.Applied(a) }

// FailoverReports returns the site's failover reports, newest first, at
// most limit (0: every one kept): those still waiting for their nodes,
// then the complete ones. The site's journaled reports are read back
// once, at the first call after a start.
func (e *Engine) FailoverReports(ctx context.Context, site string, limit int) ([]api.FailoverReport, error) {
	tr := e.times().tracker
	if !tr.Restored(site) {
		var reps []api.FailoverReport
		after := uint64(0)
		for {
			evs, err := e.store.Events(ctx, after, site, 10000)
			if err != nil {
				return nil, fmt.Errorf("reading the journal of site %q: %w", site, err)
			}
			for _, ev := range evs {
				if ev.Event.Kind != decide.KindFailoverTimed {
					continue
				}
				var rep api.FailoverReport
				if err := json.Unmarshal([]byte(ev.Event.Report), &rep); err != nil {
					e.log.Warn("a journaled failover report cannot be read; it is left out", "site", site, "seq", ev.Seq, "error", err)
					continue
				}
				reps = append(reps, rep)
			}
			if len(evs) < 10000 {
				break
			}
			after = evs[len(evs)-1].Seq
		}
		tr.Restore(site, reps)
	}
	return tr.Reports(site, limit), nil
}
