package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/vote"
)

// RoundLine is the output for one site probed in a round.
type RoundLine struct {
	Round    int                   `json:"round"`
	Site     string                `json:"site"`
	Level    int                   `json:"level"`
	Failback string                `json:"failback"`
	Levels   map[string]string     `json:"levels"`
	Origins  map[string]OriginLine `json:"origins"`
	Events   []decide.Event        `json:"events"`
	// DwellUntil is the round from which an automatic failback may leave
	// the current level, while the failback dwell holds (docs/antiflap.md).
	DwellUntil int64 `json:"dwell_until,omitempty"`
	// Ramp is the failback ramp in progress (docs/antiflap.md#failback-ramp).
	Ramp *RampLine `json:"ramp,omitempty"`
	// Confirm is set on the lines of a confirmation tick (the timeline's
	// "confirm" lines); Round is then the round before it.
	Confirm bool `json:"confirm,omitempty"`
}

// DeferredLine follows a confirmation tick's lines when its budget
// (control { confirm_budget }) left sites that were due out: they wait
// for the next confirmation tick or round.
type DeferredLine struct {
	Round    int      `json:"round"`
	Confirm  bool     `json:"confirm"`
	Deferred []string `json:"deferred"`
}

// RampLine is a failback ramp in progress after a round: the level left,
// the per cent of new requests the current level gets, and the first
// round the next step may be taken (while the current level is healthy).
type RampLine struct {
	From     int   `json:"from"`
	Weight   int   `json:"weight"`
	NextStep int64 `json:"next_step"`
}

// OriginLine is one origin of a RoundLine.
type OriginLine struct {
	State   string   `json:"state"`
	Verdict string   `json:"verdict"`
	By      *string  `json:"by"`
	Asked   []string `json:"asked"`
	// QuarantineUntil is the round from which the origin may be shown
	// healthy again, while it is quarantined (docs/antiflap.md).
	QuarantineUntil int64 `json:"quarantine_until,omitempty"`
	// Flapping is set while the origin is held as flapping.
	Flapping *FlapLine `json:"flapping,omitempty"`
}

// FlapLine is a flapping hold: the round it began and the round it ends
// at the earliest (if the judged state does not change again).
type FlapLine struct {
	Since int64 `json:"since"`
	Until int64 `json:"until"`
}

// ActionLine is the output for one operator action.
type ActionLine struct {
	Action string         `json:"action"`
	Site   string         `json:"site"`
	Origin string         `json:"origin,omitempty"`
	Level  *int           `json:"level,omitempty"`
	Events []decide.Event `json:"events,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// timelineSource answers the chain from one round line of the timeline.
type timelineSource struct {
	f     *fleet.Fleet
	round map[string]map[string][]vote.Verdict
}

func (t *timelineSource) Ask(_ context.Context, source int, targets []vote.Target, votes []vote.Counts) {
	name := t.f.Chain[source].Name
	for i, tg := range targets {
		s := t.f.Sites[tg.Site]
		key := s.Spec.Name + "/" + s.Spec.Origins[tg.Origin].Name
		for _, v := range t.round[key][name] {
			if v == vote.VerdictUp {
				votes[i].Up++
			} else {
				votes[i].Down++
			}
		}
	}
}

// Run replays steps through a fresh fleet built from cfg and writes one JSON
// line per probed site per round and one per action. With control {
// partition }, the path-partition rule runs after every round and
// confirmation tick as in the agent, and its events follow the site's.
func Run(cfg *config.Config, steps []Step, w io.Writer) error {
	return RunWith(fleet.NewRoundClock(cfg), cfg.Control.Partition, steps, w)
}

// RunFleet is Run through a fleet built by the caller, without
// path-partition detection (a test runs a configuration without anti-flap
// rules through a wall-clock fleet too, to show that the clock then
// changes nothing).
func RunFleet(f *fleet.Fleet, steps []Step, w io.Writer) error {
	return RunWith(f, nil, steps, w)
}

// RunWith is RunFleet with path-partition detection when part is not nil.
func RunWith(f *fleet.Fleet, part *config.Partition, steps []Step, w io.Writer) error {
	enc := json.NewEncoder(w)
	round := 0
	var pd *partitionRule
	if part != nil {
		pd = &partitionRule{label: part.Label, rounds: part.Rounds}
	}
	for _, st := range steps {
		if st.Confirm {
			for _, name := range st.Suspect {
				f.Suspect(name)
			}
			reports, _ := f.Confirm(context.Background(), &timelineSource{f: f, round: st.Round})
			for _, rep := range reports {
				line := SiteLine(f, rep.Site, round, pd.events(f, rep.Site, st, int64(round), rep.Events))
				line.Confirm = true
				if err := enc.Encode(line); err != nil {
					return err
				}
			}
			if d := f.Deferred(); len(d) > 0 {
				line := DeferredLine{Round: round, Confirm: true, Deferred: make([]string, len(d))}
				for k, i := range d {
					line.Deferred[k] = f.Sites[i].Spec.Name
				}
				if err := enc.Encode(line); err != nil {
					return err
				}
			}
			continue
		}
		if st.Round != nil {
			round++
			for _, rep := range f.Round(context.Background(), &timelineSource{f: f, round: st.Round}) {
				if err := enc.Encode(SiteLine(f, rep.Site, round, pd.events(f, rep.Site, st, int64(round), rep.Events))); err != nil {
					return err
				}
			}
			continue
		}
		line := ActionLine{Action: st.Action, Site: st.Site}
		var events []decide.Event
		var err error
		switch st.Action {
		case "switch":
			lvl := st.Level
			line.Level = &lvl
			events, err = f.Switch(st.Site, st.Level)
		case "disable":
			line.Origin = st.Origin
			events, err = f.Disable(st.Site, st.Origin)
		case "enable":
			line.Origin = st.Origin
			events, err = f.Enable(st.Site, st.Origin)
		default:
			return fmt.Errorf("timeline line %d: unknown action %q", st.Line, st.Action)
		}
		if err != nil {
			line.Error = err.Error()
		} else {
			line.Events = events
			if line.Events == nil {
				line.Events = []decide.Event{}
			}
		}
		if err := enc.Encode(actionJSON(line)); err != nil {
			return err
		}
	}
	return nil
}

// actionJSON keeps "events": [] on a successful action with no events, and
// leaves it out of a refused one.
func actionJSON(l ActionLine) any {
	if l.Error != "" {
		return l
	}
	type withEvents struct {
		Action string         `json:"action"`
		Site   string         `json:"site"`
		Origin string         `json:"origin,omitempty"`
		Level  *int           `json:"level,omitempty"`
		Events []decide.Event `json:"events"`
	}
	return withEvents{l.Action, l.Site, l.Origin, l.Level, l.Events}
}

// SiteLine is the round-line view of a site after a round: its level,
// effective failback, level health and each origin's outcome.
func SiteLine(f *fleet.Fleet, s *fleet.Site, round int, events []decide.Event) RoundLine {
	line := RoundLine{
		Round:    round,
		Site:     s.Spec.Name,
		Level:    s.State.Level,
		Failback: decide.EffectiveFailback(s.Spec, s.State).String(),
		Levels:   map[string]string{},
		Origins:  map[string]OriginLine{},
		Events:   append([]decide.Event{}, events...),
	}
	for i, l := range s.Spec.Levels {
		line.Levels[strconv.Itoa(l)] = s.Levels[i].String()
	}
	for i, o := range s.Spec.Origins {
		st := s.State.Origins[i]
		if st.State == decide.Disabled {
			line.Origins[o.Name] = OriginLine{State: "disabled", Verdict: "none", Asked: []string{}}
			continue
		}
		out := s.Outcomes[i]
		ol := OriginLine{State: st.State.String(), Verdict: out.Verdict.String(), Asked: s.Asked(f.Chain, i)}
		if out.By >= 0 {
			name := f.Chain[out.By].Name
			ol.By = &name
		}
		if af := s.State.AntiFlap; af != nil && af.Origins != nil {
			x := &af.Origins[i]
			ol.QuarantineUntil = x.QuarantineUntil
			if x.Held {
				ol.Flapping = &FlapLine{Since: x.HeldSince, Until: x.FlapUntil(s.Spec.AntiFlap)}
			}
		}
		line.Origins[o.Name] = ol
	}
	if f.RoundClock() {
		if until := decide.DwellUntil(s.Spec, s.State); until > int64(round) {
			line.DwellUntil = until
		}
		if r, ok := decide.RampOf(s.Spec, s.State); ok {
			line.Ramp = &RampLine{From: r.From, Weight: r.Weight, NextStep: r.NextAt}
		}
	}
	return line
}
