package readmodel

import (
	"encoding/json"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
)

// Event is the decision core's event in the API's wire form. Both marshal
// to the same JSON and print the same String (a test holds them to it).
func Event(e decide.Event) api.Event {
	out := api.Event{Kind: api.EventKind(e.Kind.String()), Origin: e.Origin, Drill: e.Drill}
	switch e.Kind {
	case decide.KindOriginState:
		out.From, out.To = e.From.String(), e.To.String()
	case decide.KindLevelSwitched:
		out.FromLevel, out.ToLevel, out.Reason = e.FromLevel, e.ToLevel, e.Reason.String()
	case decide.KindFailbackAvailable, decide.KindAllLevelsUnhealthy:
		out.Level = e.Level
	case decide.KindOriginFlapping:
		out.Flapping = e.Flapping
	case decide.KindPathPartitionSuspected:
		out.Group, out.Rounds, out.Suspected = e.Group, e.Rounds, e.Suspected
	case decide.KindDrillStarted:
		out.Level, out.Seconds = e.Level, e.Seconds
	case decide.KindDrillEnded:
		out.Level, out.End = e.Level, e.End
	case decide.KindFailoverTimed:
		var r api.FailoverReport
		if json.Unmarshal([]byte(e.Report), &r) == nil {
			out.Failover = &r
		}
	case decide.KindRampStep:
		out.Level, out.FromLevel, out.Weight = e.Level, e.FromLevel, e.Weight
	}
	return out
}

// Events converts a slice of events; nil stays nil (written as null), an
// empty slice stays empty (written as []).
func Events(evs []decide.Event) []api.Event {
	if evs == nil {
		return nil
	}
	out := make([]api.Event, len(evs))
	for i, e := range evs {
		out[i] = Event(e)
	}
	return out
}
