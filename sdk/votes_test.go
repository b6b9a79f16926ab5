package sdk_test

import (
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/sdk"
)

func TestCheckVotes(t *testing.T) {
	ballot := sdk.Ballot{Targets: []sdk.Target{
		{Site: "www", Origin: "a1"}, {Site: "www", Origin: "a2"}, {Site: "api", Origin: "b1"},
	}}
	up := func(site, origin, voter string) sdk.Vote {
		return sdk.Vote{Site: site, Origin: origin, Voter: voter, Value: sdk.Up, Reason: sdk.ReasonOK}
	}
	tests := []struct {
		name  string
		votes []sdk.Vote
		bad   []int  // indices dropped
		why   string // part of the first problem
	}{
		{"good votes", []sdk.Vote{up("www", "a1", "n1"), up("www", "a2", "n1"), up("api", "b1", "direct")}, nil, ""},
		{"several voters on one target", []sdk.Vote{up("www", "a1", "n1"), up("www", "a1", "n2"), up("www", "a1", "n3")}, nil, ""},
		{"target not in the ballot", []sdk.Vote{up("www", "zz", "n1"), up("nope", "a1", "n1")}, []int{0, 1}, "not in the ballot"},
		{"second vote of a voter", []sdk.Vote{up("www", "a1", "n1"), up("www", "a1", "n2"), up("www", "a1", "n1")}, []int{2}, "second vote"},
		{"invalid value", []sdk.Vote{{Site: "www", Origin: "a1", Voter: "n1", Value: 7}}, []int{0}, "Up, Down or Abstain"},
		{"abstention with a reason", []sdk.Vote{{Site: "www", Origin: "a1", Voter: "direct", Value: sdk.Abstain, Reason: sdk.ReasonOutOfTime}}, nil, ""},
		{"abstention without a reason", []sdk.Vote{{Site: "www", Origin: "a1", Voter: "direct", Value: sdk.Abstain}}, []int{0}, "without a reason"},
		{"invalid voter", []sdk.Vote{up("www", "a1", "bad voter")}, []int{0}, "invalid voter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			problems := sdk.CheckVotes(ballot, tt.votes)
			var got []int
			for _, p := range problems {
				got = append(got, p.Index)
			}
			if len(got) != len(tt.bad) {
				t.Fatalf("dropped %v, want %v (%v)", got, tt.bad, problems)
			}
			for i := range got {
				if got[i] != tt.bad[i] {
					t.Fatalf("dropped %v, want %v", got, tt.bad)
				}
			}
			if tt.why != "" && !strings.Contains(problems[0].Err.Error(), tt.why) {
				t.Fatalf("problem %q does not say %q", problems[0].Err, tt.why)
			}
		})
	}
}
