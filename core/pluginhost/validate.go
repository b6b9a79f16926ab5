package pluginhost

import (
	"fmt"

	"github.com/vigilcdn/vigil/sdk"
)

type targetKey struct{ site, origin string }

type voteKey struct {
	target targetKey
	voter  string
}

// keepValid drops garbage votes, logs them and counts them. Unknown reasons
// are kept as ReasonUnspecified: a newer plugin may know more reasons.
func (s *Source) keepValid(ballot sdk.Ballot, votes []sdk.Vote) []sdk.Vote {
	asked := make(map[targetKey]struct{}, len(ballot.Targets))
	for _, t := range ballot.Targets {
		asked[targetKey{t.Site, t.Origin}] = struct{}{}
	}
	seen := make(map[voteKey]struct{}, len(votes))
	kept := make([]sdk.Vote, 0, len(votes))
	var dropped int
	var first string
	drop := func(why string) {
		dropped++
		if first == "" {
			first = why
		}
	}
	for _, v := range votes {
		tk := targetKey{v.Site, v.Origin}
		if _, ok := asked[tk]; !ok {
			drop(fmt.Sprintf("vote for site %q origin %q, which was not in the ballot", v.Site, v.Origin))
			continue
		}
		if v.Value != sdk.Up && v.Value != sdk.Down {
			drop(fmt.Sprintf("vote for %s/%s with value %v", v.Site, v.Origin, v.Value))
			continue
		}
		if !sdk.ValidVoter(v.Voter) {
			drop(fmt.Sprintf("vote for %s/%s with invalid voter id %q", v.Site, v.Origin, clip(v.Voter)))
			continue
		}
		vk := voteKey{tk, v.Voter}
		if _, dup := seen[vk]; dup {
			drop(fmt.Sprintf("second vote of voter %q for %s/%s", v.Voter, v.Site, v.Origin))
			continue
		}
		seen[vk] = struct{}{}
		if v.Reason < sdk.ReasonUnspecified || v.Reason > sdk.ReasonError {
			v.Reason = sdk.ReasonUnspecified
		}
		kept = append(kept, v)
	}
	if dropped > 0 {
		s.stats.droppedVotes.Add(uint64(dropped))
		s.log.Warn("dropped garbage votes from vote source", "dropped", dropped, "kept", len(kept), "first", first)
	}
	return kept
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
