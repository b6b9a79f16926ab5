package sdk

import "fmt"

// VoteProblem is one vote that vigil drops, and why.
type VoteProblem struct {
	// Index is the vote's position in the answer.
	Index int
	// Err says what is wrong with it.
	Err error
}

// CheckVotes returns every vote of an answer to ballot that vigil drops:
// a vote for a target that was not in the ballot, a Value that is not Up,
// Down or Abstain, an Abstain without a Reason, an invalid voter id, a
// malformed PluginReason, or a second vote of one voter for one target
// (the first one counts). vigil keeps the other votes. It is the one copy
// of these rules: vigil's host calls it on every answer, and
// sdktest.CheckVotes fails a test with it.
func CheckVotes(ballot Ballot, votes []Vote) []VoteProblem {
	if len(votes) == 0 {
		return nil
	}
	// A site's first position in the ballot, then a scan of its origins:
	// ballots list one site's origins together, and this costs one map
	// entry per site rather than one per target.
	first := make(map[string]int, len(ballot.Targets)/2+1)
	for i, t := range ballot.Targets {
		if _, ok := first[t.Site]; !ok {
			first[t.Site] = i
		}
	}
	find := func(site, origin string) int {
		i, ok := first[site]
		if !ok {
			return -1
		}
		for ; i < len(ballot.Targets) && ballot.Targets[i].Site == site; i++ {
			if ballot.Targets[i].Origin == origin {
				return i
			}
		}
		for j := range ballot.Targets { // a ballot that does not keep sites together
			if ballot.Targets[j].Site == site && ballot.Targets[j].Origin == origin {
				return j
			}
		}
		return -1
	}
	var problems []VoteProblem
	seen := make([]string, len(ballot.Targets)) // target -> its first voter
	var more map[int]map[string]bool            // target -> every voter, when several
	for i, v := range votes {
		bad := func(format string, args ...any) {
			problems = append(problems, VoteProblem{Index: i, Err: fmt.Errorf(format, args...)})
		}
		t := find(v.Site, v.Origin)
		switch {
		case t < 0:
			bad("vote for site %q origin %q, which was not in the ballot", v.Site, v.Origin)
			continue
		case v.Value != Up && v.Value != Down && v.Value != Abstain:
			bad("vote for %s/%s with value %v: a vote is Up, Down or Abstain", v.Site, v.Origin, v.Value)
			continue
		case v.Value == Abstain && (v.Reason <= ReasonOK || v.Reason > MaxReason):
			bad("abstention for %s/%s without a reason saying why (such as ReasonOutOfTime)", v.Site, v.Origin)
			continue
		case !ValidVoter(v.Voter):
			bad("vote for %s/%s with invalid voter id %q (1-128 of letters, digits and ._:-@/)", v.Site, v.Origin, clipID(v.Voter))
			continue
		case v.PluginReason != "" && !ValidPluginReason(v.PluginReason):
			bad("vote for %s/%s with malformed plugin reason %q (namespace/name, lower-case letters, digits, _ and -)", v.Site, v.Origin, clipID(v.PluginReason))
			continue
		}
		prev := seen[t]
		if prev == "" {
			seen[t] = v.Voter
			continue
		}
		if more == nil {
			more = map[int]map[string]bool{}
		}
		voters := more[t]
		if voters == nil {
			voters = map[string]bool{prev: true}
			more[t] = voters
		}
		if voters[v.Voter] {
			bad("second vote of voter %q for %s/%s", v.Voter, v.Site, v.Origin)
			continue
		}
		voters[v.Voter] = true
	}
	return problems
}

func clipID(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
