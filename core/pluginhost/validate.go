package pluginhost

import (
	"github.com/vigilcdn/vigil/sdk"
)

// keepValid drops garbage votes (sdk.CheckVotes says which: the one copy
// of the rules, which sdktest applies too), logs them and counts them.
// Unknown reasons are kept as ReasonUnspecified: a newer plugin may know
// more reasons. A vote's PluginReason stays a field of its own, apart
// from its Detail: the API, vigil probe and the metrics show it as such.
func (s *Source) keepValid(ballot sdk.Ballot, votes []sdk.Vote) []sdk.Vote {
	problems := sdk.CheckVotes(ballot, votes)
	kept := votes
	if len(problems) > 0 {
		kept = make([]sdk.Vote, 0, len(votes)-len(problems))
		next := 0
		for i, v := range votes {
			if next < len(problems) && problems[next].Index == i {
				next++
				continue
			}
			kept = append(kept, v)
		}
		s.stats.droppedVotes.Add(uint64(len(problems)))
		s.log.Warn("dropped garbage votes from vote source", "dropped", len(problems), "kept", len(kept), "first", problems[0].Err.Error())
	}
	for i := range kept {
		if kept[i].Reason < sdk.ReasonUnspecified || kept[i].Reason > sdk.MaxReason {
			kept[i].Reason = sdk.ReasonUnspecified
		}
		if capDetail(&kept[i]) {
			s.stats.truncatedDetails.Add(1)
		}
	}
	return kept
}
